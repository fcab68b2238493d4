#!/usr/bin/env bash
# Integration test: faults across hosts, never a hang, always a name. On the 4-host fixture
# (tools/slurm/fixture.sh, SLURM_FIXTURE_HOSTS=4, SlurmdTimeout 10 s), 8 ranks (2 per host) train
# the Fashion-MNIST CNN with dist.timeout_s = T and a checkpoint every 20 steps; once the first
# checkpoint exists:
#   link      h3's link is cut (its veth taken down): every rank, on both sides, exits within 2T;
#             ranks on h1, h2, h4 say "ranks 4-5 on host h3 do not answer (...)", ranks 4-5 name
#             the others by host; srun exits 3 (dptrain's status for a communication failure)
#             once the link is back; every rank wrote flight/rank-<r>.json and tools/flightrec
#             says "ranks 4-5 on host h3 lost contact with all other ranks in <collective>".
#   stop      every process on h3 is stopped (SIGSTOP): ranks on h1, h2, h4 exit within 2T naming
#             ranks 4-5 on host h3; after SIGCONT srun exits 3 and flightrec says ranks 4-5 on
#             host h3 stopped answering in (or never entered) the collective.
#   slurmd    h3's slurmd is killed (SIGKILL): the ranks are not affected until Slurm declares h3
#             failed (SlurmdTimeout) and stops the job: srun says "Node failure on h3", every rank
#             stops after the same step (SIGTERM, agreed through the ranks) with its checkpoint,
#             srun exits 143; nothing hangs.
#   straggler no fault: rank 5 sleeps 60 ms at the start of every step (DPTRAIN_FAULT_SLOW_STEP_MS,
#             set for it alone): metrics.jsonl's train lines, rank 0's log and the progress line
#             name rank 5 on host h3 as the straggler; a SIGUSR2 to rank 3 writes
#             flight/rank-3.json and training goes on to exit 0.
# After each fault the last checkpoint (`latest`) passes ckptinfo (every CRC) and h3 is restored.
# Needs root, the Slurm/munge/PMIx packages, iproute2 and dataset-fashion-mnist (tools/setup.sh
# installs them); FAILS, not skips, without them. About 2 minutes on 2 shared cores.
# Usage: bash tests/integration/test_hosts_faults.sh BUILD_DIR (from the repo root, as ctest).
set -uo pipefail

build=${1:?usage: test_hosts_faults.sh BUILD_DIR}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "$build" && pwd)
dptrain=$build/dptrain
cfg=$repo/models/fmnist_cnn.cfg
t_start=$SECONDS

T=8  # dist.timeout_s
# 5 epochs of 938 steps: every case stops the job by a fault, and the run must outlast the slowest
# (a killed slurmd is noticed by Slurm after SlurmdTimeout, ~25 s) on an idle, fast machine too.
long=(--log-level info --set data.train_limit=60000 data.eval_limit=500 train.epochs=5 train.batch_size=8
      train.threads=1 "dist.timeout_s=$T" checkpoint.every_steps=20 checkpoint.keep=2 train.log_every=10)

fail() { echo "FAIL: $*" >&2; exit 1; }
# shellcheck source=tests/integration/hosts_env.sh
. "$(dirname "${BASH_SOURCE[0]}")/hosts_env.sh"
prepare_hosts_test dptrain flightrec ckptinfo
work=$(mktemp -d /tmp/dptrain-hosts-faults.XXXXXX)
run_pid=""
stopped=""
cleanup() {
  # shellcheck disable=SC2086
  [ -z "$stopped" ] || kill -CONT $stopped 2>/dev/null
  [ -z "$run_pid" ] || kill "$run_pid" 2>/dev/null
  stop_hosts_cluster
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

export SLURM_FIXTURE_SLURMD_TIMEOUT=10
start_hosts_cluster
echo "     cluster up: hosts ${HOSTS[*]} ($((SECONDS - t_start)) s)"
failures=0
errs=()
check() { "$@" || errs+=("$CHECK_WHY"); }
report() {  # report NAME: one ok/FAIL line for the case
  if [ ${#errs[@]} -eq 0 ]; then
    echo "ok   $1"
  else
    echo "FAIL $1:" >&2
    printf '  - %s\n' "${errs[@]}" >&2
    tail -n 15 "$work/$2.out" 2>/dev/null | sed 's/^/  | /' >&2
    failures=$((failures + 1))
  fi
  errs=()
}

# start_run NAME: srun -N4 -n8 dptrain in the background ($run_pid; its exit status goes to
# $work/NAME.rc); returns once all 8 ranks run and checkpoint step 20 exists (or, with NOCKPT=1,
# once the 8 ranks run). SLOW_RANK=r: rank r alone gets DPTRAIN_FAULT_SLOW_STEP_MS=$SLOW_MS.
start_run() {
  local name=$1
  # shellcheck disable=SC2016
  (timeout -k 5 300 env SLOW_RANK="${SLOW_RANK:--1}" SLOW_MS="${SLOW_MS:-0}" "$fixture" run "$cluster_dir" \
     srun --mpi=pmix -N4 -n8 -t 5 sh -c \
     '[ "$SLURM_PROCID" = "$SLOW_RANK" ] && export DPTRAIN_FAULT_SLOW_STEP_MS=$SLOW_MS; exec "$@"' sh "$dptrain" "$cfg" \
     --run-dir "$work/runs" --name "$name" "${long[@]}" >"$work/$name.out" 2>&1
   echo $? >"$work/$name.rc") &
  run_pid=$!
  local ready="[ \$(dptrain_pids ${HOSTS[*]} | wc -l) -eq 8 ]"
  [ "${NOCKPT:-0}" = 1 ] || ready="$ready && [ -s $work/runs/$name/checkpoints/latest ]"
  wait_for "$ready" 120 || {
    tail -n 20 "$work/$name.out" >&2
    local n
    n=$(dptrain_pids "${HOSTS[@]}" | wc -l)
    fail "$name: the 8 ranks did not start training ($n dptrain processes on ${HOSTS[*]}; checkpoint: $(cat "$work/runs/$name/checkpoints/latest" 2>/dev/null || echo none))"
  }
}

# finish_run NAME LIMIT_S: waits for srun; prints its exit status.
finish_run() {
  wait_for "[ -s $work/$1.rc ]" "$2" || { kill "$run_pid" 2>/dev/null; echo timeout; return; }
  wait "$run_pid" 2>/dev/null
  run_pid=""
  cat "$work/$1.rc"
}

# exits_within T0 LIMIT HOST...: the dptrain processes on those hosts all exit within LIMIT s of T0.
exits_within() {
  wait_for "[ -z \"\$(dptrain_pids $*)\" ]" $(($2 + 20)) >/dev/null
  local el
  el=$(elapsed_s "$1")
  CHECK_WHY="the ranks on ${*:3} exited ${el} s after the fault, not within $2 s (2 x dist.timeout_s)"
  echo "     ranks on ${*:3}: all exited ${el} s after the fault (limit $2 s)"
  lt "$el" "$2"
}

# log_says R REGEX: rank R's log has a line matching REGEX (grep -E).
log_says() {
  CHECK_WHY="logs/rank-$1.log has no line matching /$2/: $(grep -h 'error' "$run/logs/rank-$1.log" 2>/dev/null | tail -n 1 | cut -c1-300)"
  grep -qE "$2" "$run/logs/rank-$1.log" 2>/dev/null
}

checkpoint_intact() {
  CHECK_WHY="the last checkpoint does not pass ckptinfo: $("$build/ckptinfo" "$run" 2>&1 | tail -n 2)"
  "$build/ckptinfo" "$run" >/dev/null 2>&1
}

flightrec_says() {
  local line
  line=$("$build/flightrec" "$run" 2>&1)
  echo "     flightrec: $line"
  CHECK_WHY="flightrec said '$line', not /$1/"
  [[ $line =~ $1 ]]
}

srun_status_is() {
  CHECK_WHY="srun exited $2, not $1"
  [ "$2" = "$1" ]
}

restore_h3() {
  "$fixture" link "$cluster_dir" h3 up
  in_cluster scontrol update nodename=h3 state=resume >/dev/null 2>&1 || true
  wait_for "[ \$(in_cluster sinfo -h -N -o '%N %T' | grep -c ' idle\$') -eq 4 ]" 60 ||
    fail "h3 did not come back (sinfo: $(in_cluster sinfo -h -N -o '%N %T' | tr '\n' ' '))"
}

silent_h3="ranks 4-5 on host h3 do not answer \(are their processes stopped or hung, or their host cut off\?\); no progress for $T s \(timeout\)"
silent_others="ranks 0-1 on host h1, ranks 2-3 on host h2, ranks 6-7 on host h4 do not answer \(are their processes stopped or hung, or their hosts cut off\?\); no progress for $T s \(timeout\)"
collective='(all-reduce|broadcast|barrier) #[0-9]+ \([^)]*step [0-9]+\)'

# Each case a function; HOSTS_FAULTS_CASES picks some (default: all, in this order).
case_link() {
run=$work/runs/link
start_run link
t0=$(now_s)
"$fixture" link "$cluster_dir" h3 down
check exits_within "$t0" $((2 * T)) h1 h2 h3 h4
restore_h3
rc=$(finish_run link 60)
check srun_status_is 3 "$rc"
for r in 0 1 2 3 6 7; do check log_says $r "$silent_h3"; done
for r in 4 5; do check log_says $r "$silent_others"; done
CHECK_WHY="not every rank wrote flight/rank-<r>.json: $(ls "$run/flight" 2>&1 | tr '\n' ' ')"
check test "$(ls "$run"/flight/rank-*.json 2>/dev/null | wc -l)" -eq 8
check flightrec_says "^ranks 4-5 on host h3 lost contact with all other ranks in $collective; "
check checkpoint_intact
report "link cut: every rank exits within 2 x $T s naming the other side by host, srun exits 3, flightrec names h3" link
}

case_stop() {
run=$work/runs/stop
start_run stop
stopped=$("$fixture" pids "$cluster_dir" h3 | tr '\n' ' ')
t0=$(now_s)
# shellcheck disable=SC2086
kill -STOP $stopped
check exits_within "$t0" $((2 * T)) h1 h2 h4
# shellcheck disable=SC2086
kill -CONT $stopped
stopped=""
rc=$(finish_run stop 60)
check srun_status_is 3 "$rc"
for r in 0 1 2 3 6 7; do check log_says $r "$silent_h3"; done
check flightrec_says "^ranks 4-5 on host h3 (stopped answering in|never entered) $collective; "
check checkpoint_intact
restore_h3
report "host stopped: ranks on h1 h2 h4 exit within 2 x $T s naming ranks 4-5 on host h3, srun exits 3, flightrec names h3" stop
}

# a straggler, and SIGUSR2 (no fault; 96 steps)
case_straggler() {
run=$work/runs/straggler
local long=(--log-level info --set data.train_limit=6144 data.eval_limit=500 train.epochs=1 train.batch_size=8
      train.warmup_steps=8 train.threads=1 "dist.timeout_s=$T" train.log_every=16 dist.straggler_ms=10
      run.progress_every_s=1)
SLOW_RANK=5 SLOW_MS=60 NOCKPT=1 start_run straggler
# SIGUSR2 once rank 3 trains (its log's "links:" line comes after the flight recorder's handler).
wait_for "grep -q 'links: host' $run/logs/rank-3.log 2>/dev/null" 60 || fail "straggler: rank 3 did not start"
kill -USR2 "$(rank_pid 3 h2)"
rc=$(finish_run straggler 120)
check srun_status_is 0 "$rc"
last=$(grep '"split":"train"' "$run/metrics.jsonl" 2>/dev/null | tail -n 1)
names_rank5() { [[ $last =~ \"last_host\":\"h3\",\"last_of\":[0-9]+,\"last_rank\":5, && $last =~ \"straggler\":5, ]]; }
CHECK_WHY="the last straggler report in metrics.jsonl does not name rank 5 on h3: $last"
check names_rank5
echo "     last straggler report: $last"
check log_says 0 'straggler: rank 5 on host h3 arrived last at [0-9]+ of [0-9]+ gradient all-reduces'
CHECK_WHY="no progress line names the straggler: $(grep -m1 'straggler' "$work/straggler.out")"
check grep -qE 'step [0-9]+/96 .* straggler rank 5 on h3 \+[0-9]+ms' "$work/straggler.out"
check flightrec_says '^no rank is missing from .*; rank 3 recorded: SIGUSR2 received'
report "straggler: rank 5 on host h3 named in metrics.jsonl, the log and the progress line; SIGUSR2 wrote rank 3's flight record" straggler
}

# last: h3's slurmd is gone afterwards
case_slurmd() {
run=$work/runs/slurmd
start_run slurmd
t0=$(now_s)
kill -KILL "$(cat "$cluster_dir/run/slurmd-h3.pid")"
check exits_within "$t0" 60 h1 h2 h3 h4
rc=$(finish_run slurmd 60)
check srun_status_is 143 "$rc"
CHECK_WHY="srun did not report the node failure: $(grep srun: "$work/slurmd.out" | head -n 3)"
check grep -q 'srun: error: Node failure on h3' "$work/slurmd.out"
step=$(sed -nE 's/.*stopped at step ([0-9]+) \(Terminated\).*/\1/p' "$run/logs/rank-0.log" | head -n 1)
CHECK_WHY="rank 0 did not stop after a step: $(tail -n 2 "$run/logs/rank-0.log")"
check test -n "$step"
for r in 0 1 2 3 4 5 6 7; do check log_says $r "stopped at step ${step:-X} \(Terminated\)"; done
CHECK_WHY="latest is not checkpoint step ${step:-?}: $(cat "$run/checkpoints/latest" 2>&1)"
check grep -q "step-0*${step:-X}.safetensors" "$run/checkpoints/latest"
check checkpoint_intact
report "slurmd killed: Slurm fails h3 and stops the job; every rank stops after step ${step:-?} with its checkpoint, srun exits 143" slurmd
}

for c in ${HOSTS_FAULTS_CASES:-link stop straggler slurmd}; do "case_$c"; done

echo "total $((SECONDS - t_start)) s"
[ $failures -eq 0 ] || fail "$failures case(s) failed (details above)"
echo "PASS"
