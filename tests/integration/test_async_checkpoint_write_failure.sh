#!/usr/bin/env bash
# Integration test (issue 32), test_checkpoint_write_failure.sh's twin for checkpoint.async: rank 0
# of a 2-rank job resumed from a good checkpoint of step 3 cannot write files past 64 KiB (`ulimit -f`,
# as a full disk refuses them: "File too large" instead of "No space left on device"). The
# background write of step 6 fails: rank 0 reports it, naming the step, the reason and the
# checkpoint of step 3 as the newest complete one, and both ranks train on to step 9. The last
# step's checkpoint is written synchronously, as before async: it fails the job as today's test
# expects, on both ranks. The checkpoint of step 3 is intact (`latest` names it, no temporary file
# is left), and a run without the cap resumes from it and finishes.
# Usage: bash tests/integration/test_async_checkpoint_write_failure.sh BUILD_DIR (DPTRAIN_BIN
# overrides the binary).
set -uo pipefail
build=${1:?usage: test_async_checkpoint_write_failure.sh BUILD_DIR}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "$build" && pwd)
dptrain=${DPTRAIN_BIN:-$build/dptrain}
tmp=$(mktemp -d /tmp/dptrain-async-ckpt-fail.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; for f in "$tmp"/*.log; do echo "== $f"; tail -6 "$f"; done >&2; exit 1; }
ckpts=$tmp/runs/full/checkpoints

# run STEPS CAP_RANK0: both ranks; rank 0's files capped at 64 KiB when CAP_RANK0 = 1.
run() {
  local steps=$1 cap=$2 port token
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  token=$(python3 -c 'import secrets; print(secrets.token_hex(32))')
  pids=()
  for r in 0 1; do
    # SIGXFSZ ignored: a write past the cap fails with EFBIG as one past a full disk fails with ENOSPC.
    ( if [ $r = 0 ] && [ "$cap" = 1 ]; then ulimit -f 64; trap '' XFSZ; fi
      exec env -i PATH="$PATH" HOME="${HOME:-/root}" OMP_NUM_THREADS=1 RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
        MASTER_PORT="$port" DPTRAIN_JOB_TOKEN="$token" "$dptrain" "$repo/models/fmnist_mlp.cfg" --run-dir "$tmp/runs" \
        --name full --log-level info --set data.train_limit=1024 data.eval_limit=128 train.steps=$steps \
        train.batch_size=32 model.hidden=[64] checkpoint.every_steps=3 checkpoint.async=true checkpoint.final=false \
        train.log_every=1 run.tensorboard=false dist.timeout_s=60 ) > "$tmp/rank$r.log" 2>&1 &
    pids+=($!)
  done
}

run 3 0
wait "${pids[0]}" || fail "the uncapped run to step 3 failed"
wait "${pids[1]}" || fail "rank 1 of the uncapped run to step 3 failed"
[ "$(cat "$ckpts/latest")" = "step-00000003.safetensors" ] || fail "no checkpoint of step 3 to resume from"
cp "$ckpts/step-00000003.safetensors" "$tmp/step3.copy"

run 9 1
wait "${pids[0]}" && fail "rank 0 succeeded although it could not write its last checkpoint"
wait "${pids[1]}" && fail "rank 1 succeeded although rank 0 failed"
grep -q "the checkpoint of step 6 could not be written in the background: writing safetensors file '.*step-00000006.safetensors.tmp' failed: File too large.*training goes on, and the newest complete checkpoint is step 3 " "$tmp/rank0.log" \
  || fail "rank 0 does not report the failed background write of step 6"
for r in 0 1; do
  grep -q "step 9/9" "$tmp/runs/full/logs/rank-$r.log" || fail "rank $r did not train on to step 9 after the failed write"
done
grep -q "dptrain: error: rank 0 failed to write the checkpoint .*step-00000009.safetensors.*File too large" "$tmp/rank0.log" \
  || fail "rank 0 does not say that it failed to write the last checkpoint"
grep -q "dptrain: error: .*rank 0 failed to write the checkpoint .*step-00000009.safetensors" "$tmp/rank1.log" \
  || fail "rank 1 does not say that rank 0 failed to write the last checkpoint: $(grep error "$tmp/rank1.log")"
[ "$(cat "$ckpts/latest")" = "step-00000003.safetensors" ] || fail "latest is $(cat "$ckpts/latest"), not step 3's"
cmp -s "$ckpts/step-00000003.safetensors" "$tmp/step3.copy" || fail "the checkpoint of step 3 changed"
ls "$ckpts" | grep -q -v "^step-00000003.safetensors$\|^latest$" && fail "files left in $ckpts: $(ls "$ckpts")"

report=$(grep -o 'the checkpoint of step 6 could not be written in the background: .*' "$tmp/rank0.log" | cut -c1-200)

run 9 0
wait "${pids[0]}" || fail "the uncapped rerun failed"
wait "${pids[1]}" || fail "rank 1 of the uncapped rerun failed"
grep -q "resumed from .*step-00000003.safetensors" "$tmp/rank0.log" || fail "the rerun did not resume from step 3"
[ "$(cat "$ckpts/latest")" = "step-00000009.safetensors" ] || fail "the rerun did not reach its checkpoint of step 9"
echo "PASS: rank 0 said: $report..."
