#!/usr/bin/env bash
# Integration test (issue 14): strangers attack rank 0's TCP store while a 2-rank job (env
# bootstrap, DPTRAIN_JOB_TOKEN, every rank under `ulimit -n 1024`) starts and trains with a
# checkpoint every 5 steps:
#   - a hello as rank 1 without the token, and one with a made-up proof     -> refused
#   - a second job's rank 1 (another token) and its rank 0 on the same port -> refused, named
#   - a frame declaring 1 GiB, 600 MB streamed                              -> dropped at once;
#                                                                              rank 0 grows < 40 MB
#   - 2000 connections held during the whole run                            -> shed; checkpoints
#                                                                              written; the store
#                                                                              thread does not spin
# Then both ranks exit 0 and the final weights equal an undisturbed run's, bit for bit.
# Usage: bash tests/integration/test_store_attacks.sh BUILD_DIR (DPTRAIN_BIN overrides the
# binary, e.g. to show what an older build does; ONLY="hello second huge flood" picks attacks).
set -uo pipefail

build=${1:?usage: test_store_attacks.sh BUILD_DIR}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "$build" && pwd)
dptrain=${DPTRAIN_BIN:-$build/dptrain}
diffckpt=$build/diffckpt
attack="python3 $repo/tests/integration/store_attack.py"
cfg=$repo/models/fmnist_mlp.cfg
tmp=$(mktemp -d /tmp/dptrain-store-attacks.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; for f in "$tmp"/*.log; do echo "== $f"; tail -5 "$f"; done >&2; exit 1; }

token=$(python3 -c 'import secrets; print(secrets.token_hex(32))')
other=$(python3 -c 'import secrets; print(secrets.token_hex(32))')
job=$($attack jobid "$token")
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
common=(--log-level info --set data.train_limit=2048 data.eval_limit=256 train.steps=40 train.batch_size=32
        model.hidden=[64] checkpoint.every_steps=5 dist.timeout_s=120)

# start_rank RANK PORT TOKEN ROOT: one rank of the job in the background; its pid is appended to pids.
start_rank() {
  ( ulimit -n 1024
    exec env -i PATH="$PATH" HOME="${HOME:-/root}" OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive RANK="$1" WORLD_SIZE=2 \
      LOCAL_RANK="$1" LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$2" DPTRAIN_JOB_TOKEN="$3" \
      "$dptrain" "$cfg" --run-dir "$4" --name job "${common[@]}" ) > "$4.rank$1.log" 2>&1 &
  pids+=($!)
}
wait_listening() {  # PORT: until the store accepts connections (10 s at most)
  for _ in $(seq 100); do
    python3 -c "import socket,sys; socket.create_connection(('127.0.0.1',$1),timeout=1)" 2>/dev/null && return 0
    sleep 0.1
  done
  fail "nothing listens on port $1"
}
store_cpu_s() {  # PID: CPU seconds of its thread named dp-store
  for t in /proc/"$1"/task/*; do
    if [ "$(cat "$t/comm" 2>/dev/null)" = dp-store ]; then
      awk -v hz="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); print ($12 + $13) / hz }' "$t/stat"; return
    fi
  done
  echo 0
}

# 1. The undisturbed run.
port=$(free_port)
start_rank 0 "$port" "$token" "$tmp/calm"; r0=${pids[-1]}
start_rank 1 "$port" "$token" "$tmp/calm"; r1=${pids[-1]}
wait "$r0" || fail "undisturbed rank 0 failed"
wait "$r1" || fail "undisturbed rank 1 failed"

# 2. The attacked run: rank 0 serves the store and waits for rank 1 while the attacks come.
port=$(free_port)
start_rank 0 "$port" "$token" "$tmp/hit"; r0=${pids[-1]}
wait_listening "$port"
want() { [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $1 "* ]]; }
if want hello; then
out=$($attack hello "$port" 1 2)
[ "$out" = "refused: this TCP store belongs to job $job and requires its job token (DPTRAIN_JOB_TOKEN); this process has none" ] \
  || fail "hello without a token: $out"
out=$($attack hello "$port" 1 2 "$(printf '%064x' 7)")
case "$out" in "refused: this TCP store belongs to job $job, not to no job token"*) ;; *) fail "hello with a made-up proof: $out" ;; esac
fi
if want second; then
# The second job: its rank 1 connects, its rank 0 tries to serve the same port.
start_rank 1 "$port" "$other" "$tmp/second"; s1=${pids[-1]}
wait "$s1" && fail "the second job's rank 1 was let in"
grep -q "the TCP store at 127.0.0.1:$port belongs to another job (job $job, its rank 0 is pid $r0 on host" "$tmp/second.rank1.log" \
  || fail "the second job's rank 1 was not told whose store it reached"
start_rank 0 "$port" "$other" "$tmp/second"; s0=${pids[-1]}
wait "$s0" && fail "the second job's rank 0 served the same port"
grep -q "it is the TCP store of another dptrain job (job $job) (its rank 0 is pid $r0 on host .*): give each job its own MASTER_PORT" \
  "$tmp/second.rank0.log" || fail "the second job's rank 0 was not told whose port it is"
fi
if want huge; then
out=$($attack huge "$port" "$r0")
taken=$(echo "$out" | awk '{print $2}'); grown=$(echo "$out" | awk '{print $5}')
[ "$taken" -lt 16 ] || fail "the store took $taken MB of a 1 GiB frame"
[ "${grown%.*}" -lt 40 ] || fail "rank 0 grew by $grown MB"
echo "1 GiB frame: the store took $taken MB before dropping it; rank 0 grew by $grown MB"
fi
flood=
if want flood; then
# 2000 connections, held while the job starts and trains.
$attack flood "$port" 2000 1000 > "$tmp/flood.log" 2>&1 &
flood=$!; pids+=($flood)
for _ in $(seq 300); do grep -q opened "$tmp/flood.log" && break; sleep 0.1; done
grep -q "opened 2000" "$tmp/flood.log" || fail "the flood could not open its connections: $(cat "$tmp/flood.log")"
cpu0=$(store_cpu_s "$r0"); sleep 2; cpu1=$(store_cpu_s "$r0")
spin=$(python3 -c "print(f'{$cpu1 - $cpu0:.2f}')")
python3 -c "import sys; sys.exit(0 if $cpu1 - $cpu0 < 0.5 else 1)" || fail "the store thread used $spin s of CPU in 2 s"
echo "2000 connections held: the store thread used $spin s of CPU in 2 s"
fi
start_rank 1 "$port" "$token" "$tmp/hit"; r1=${pids[-1]}
wait "$r0" || fail "attacked rank 0 failed"
wait "$r1" || fail "attacked rank 1 failed"
[ -n "$flood" ] && kill "$flood" 2>/dev/null
grep -q "Too many open files" "$tmp"/hit.rank*.log && fail "a rank ran out of descriptors"
ls "$tmp/hit/job/checkpoints/"*.safetensors > /dev/null || fail "no checkpoint was written"
"$diffckpt" "$tmp/calm/job/final.safetensors" "$tmp/hit/job/final.safetensors" \
  || fail "the attacked run's final weights differ from the undisturbed run's"
echo "PASS: every attack refused; the attacked job's final weights equal the undisturbed run's"
