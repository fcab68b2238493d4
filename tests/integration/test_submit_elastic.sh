#!/usr/bin/env bash
# Integration test: `dptrain submit --min-nodes` on the 4-host fixture (tools/slurm/fixture.sh,
# SLURM_FIXTURE_HOSTS=4, SlurmdTimeout 10 s). The Fashion-MNIST MLP, one rank per host, a global
# batch of 24 (6 per rank at 4 ranks), a checkpoint every 20 steps, every step slowed to
# $SLOW_MS ms (DPTRAIN_FAULT_SLOW_STEP_MS) so that a host can be crashed mid-run:
#   shrink  submit --nodes 4 --min-nodes 3 --max-restarts 1; once checkpoint step $CRASH_AFTER
#           exists, every process on h3 is SIGKILLed (slurmd, slurmstepd, the rank: the host
#           crashed). Slurm declares h3 down and (--no-kill) drops it from the job; the script's
#           next srun step runs on h1, h2, h4. The job must COMPLETE; its batch log must say
#           "host(s) h3 left the job ...; restart 1 of 1 on 3 node(s): ... resuming from step S";
#           metrics.jsonl must hold the restart line (host h3, rank 2, nodes 3, resume_step S);
#           the second launch's rank 0 must resume from step-S at 3 ranks and keep the global
#           batch (train.elastic_batch = "global": micro-batches of 4, 2 per step); its
#           final.safetensors must equal bit for bit (diffckpt) a straight 3-host run
#           (srun -N3 on h1, h2, h4) resumed from a copy of the same step-S checkpoint.
#   whole   the cluster started afresh; submit --nodes 4 --min-nodes 4 --max-restarts 1, h4
#           crashed the same way: the job must FAIL with the line naming the missing host
#           ("missing: h4 (down or not responding); --min-nodes 4 needs 4: not restarting") and
#           no restart line in metrics.jsonl.
# Every daemon and namespace the test starts is stopped by the fixture's stop (the EXIT trap).
# Needs root, the Slurm/munge/PMIx packages, iproute2 and dataset-fashion-mnist (tools/setup.sh
# installs them); FAILS, not skips, without them. About 90 s on 2 shared cores (most of it Slurm
# noticing the crashed host: SlurmdTimeout, then the ping that fails).
# Usage: bash tests/integration/test_submit_elastic.sh BUILD_DIR (from the repo root, as ctest).
set -uo pipefail

build=${1:?usage: test_submit_elastic.sh BUILD_DIR}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "$build" && pwd)
dptrain=$build/dptrain
diffckpt=$build/diffckpt
cfg=$repo/models/fmnist_mlp.cfg
t_start=$SECONDS

STEPS=300        # 3 epochs of 100 steps (2400 samples, 24 per step)
CRASH_AFTER=40   # crash a host once this checkpoint exists
SLOW_MS=40       # every step at least this long: the crash lands mid-run
common=(--log-level info --set 'model.hidden=[64]' data.train_limit=2400 data.eval_limit=200 train.steps=$STEPS
        train.batch_size=6 train.optimizer=sgd train.lr=0.01 train.momentum=0.9 train.threads=1 train.log_every=10
        dist.timeout_s=20 checkpoint.every_steps=20 checkpoint.keep=0)

fail() { echo "FAIL: $*" >&2; exit 1; }
# shellcheck source=tests/integration/hosts_env.sh
. "$(dirname "${BASH_SOURCE[0]}")/hosts_env.sh"
prepare_hosts_test dptrain diffckpt
require_slurm sbatch scontrol squeue
work=$(mktemp -d /tmp/dptrain-submit-elastic.XXXXXX)
job=""
cleanup() {
  [ -z "$job" ] || [ -z "$cluster_dir" ] || in_cluster scancel "$job" >/dev/null 2>&1
  stop_hosts_cluster
  if [ "${KEEP_WORK:-0}" = 1 ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
say() { echo "     $* ($((SECONDS - t_start)) s)"; }
export SLURM_FIXTURE_SLURMD_TIMEOUT=10

show_job() {  # what a failure shows: the batch log, rank 0's log, slurmctld's last lines
  local run=$1 f
  for f in "$run"/logs/slurm-*.out "$run/logs/rank-0.log" "$cluster_dir/log/slurmctld.log"; do
    [ -f "$f" ] || continue
    echo "  --- $f (last 15 lines)" >&2
    tail -n 15 "$f" | sed 's/^/  | /' >&2
  done
}
job_fail() { show_job "$1"; fail "$2"; }

# submit NAME MIN_NODES: dptrain submit (sbatch where the cluster is); sets $job.
submit() {
  (cd "$work" && DPTRAIN_FAULT_SLOW_STEP_MS=$SLOW_MS in_cluster "$dptrain" submit --nodes 4 --min-nodes "$2" \
     --max-restarts 1 "$cfg" --run-dir "$work/runs" --name "$1" "${common[@]}") >"$work/$1.submit" 2>&1 ||
    { cat "$work/$1.submit" >&2; fail "dptrain submit --min-nodes $2 failed"; }
  job=$(sed -nE 's/^dptrain: submitted batch job ([0-9]+) .*/\1/p' "$work/$1.submit")
  [ -n "$job" ] || { cat "$work/$1.submit" >&2; fail "dptrain submit printed no 'submitted batch job N'"; }
}

# crash_when_checkpointed RUN HOST: once checkpoint step CRASH_AFTER exists, SIGKILL every process on HOST.
crash_when_checkpointed() {
  local ckpt
  ckpt=$(printf '%s/checkpoints/step-%08d.safetensors' "$1" $CRASH_AFTER)
  wait_for "[ -f $ckpt ]" 90 || job_fail "$1" "no checkpoint step $CRASH_AFTER within 90 s of the submission"
  local pids
  pids=$("$fixture" pids "$cluster_dir" "$2" | tr '\n' ' ')
  # shellcheck disable=SC2086
  kill -KILL $pids
  say "checkpoint step $CRASH_AFTER written; $2 crashed (SIGKILL to its $(echo $pids | wc -w) processes)"
}

# wait_job RUN LIMIT_S: the job's last state before it left the queue (COMPLETED, FAILED, ...).
wait_job() {
  local state="" s deadline=$((SECONDS + $2))
  while [ $SECONDS -lt $deadline ]; do
    s=$(in_cluster scontrol show job "$job" 2>/dev/null | grep -oE 'JobState=[A-Z_]+' | cut -d= -f2)
    [ -n "$s" ] && state=$s
    case "$s" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) echo "$s"; return ;; "") [ -n "$state" ] && { echo "$state"; return; } ;; esac
    sleep 0.5
  done
  echo "still $state after $2 s"
}

errs=()
expect() {  # expect WHY CMD...: CMD must succeed
  local why=$1
  shift
  "$@" || errs+=("$why")
}
report() {  # report RUN NAME
  if [ ${#errs[@]} -gt 0 ]; then
    printf '  - %s\n' "${errs[@]}" >&2
    job_fail "$1" "$2"
  fi
  errs=()
}

# --- shrink: a host lost, the job goes on with 3
start_hosts_cluster
say "cluster up: hosts ${HOSTS[*]}"
run=$work/runs/shrink
submit shrink 3
say "submitted job $job (--nodes 4 --min-nodes 3 --max-restarts 1)"
crash_when_checkpointed "$run" h3
state=$(wait_job "$run" 180)
[ "$state" = COMPLETED ] || job_fail "$run" "job $job ended '$state', not COMPLETED"
job_shrink=$job
job=""
say "job $job_shrink COMPLETED"
batch=$run/logs/slurm-$job_shrink.out
S=$(sed -nE 's/^dptrain submit: host\(s\) h3 left the job .*; restart 1 of 1 on 3 node\(s\): .*resuming from step ([0-9]+).*/\1/p' "$batch")
[ -n "$S" ] || job_fail "$run" "the batch log has no line 'dptrain submit: host(s) h3 left the job ...; restart 1 of 1 on 3 node(s): ... resuming from step S'"
ckpt=$(printf '%s/checkpoints/step-%08d.safetensors' "$run" "$S")
restart=$(grep '"split":"restart"' "$run/metrics.jsonl")
expect "metrics.jsonl's restart line does not name h3, rank 2, 3 nodes and step $S: '$restart'" \
  grep -qE "\"host\":\"h3\".*\"nodes\":3.*\"rank\":2,.*\"resume_step\":$S," <<<"$restart"
expect "metrics.jsonl has $(grep -c '"split":"restart"' "$run/metrics.jsonl") restart lines, not 1" \
  test "$(grep -c '"split":"restart"' "$run/metrics.jsonl")" = 1
expect "rank 0 did not resume from $ckpt" grep -q "resumed from $ckpt: step $S," "$run/logs/rank-0.log"
expect "the 3-rank launch did not keep the global batch 24 (batch 4 x 2 micro-batches)" \
  grep -qE "training: .*batch 4 x 2 micro-batches" "$run/logs/rank-0.log"
expect "no final.safetensors" test -f "$run/final.safetensors"
expect "rank 3's log says it resumed: a 4th rank ran after the restart" \
  test "$(grep -c 'resumed from' "$run/logs/rank-3.log" 2>/dev/null)" = 0
report "$run" "the job did not shrink to 3 hosts as it should"
say "ok   shrink: h3 left, restart 1 on h1 h2 h4 from step $S, the global batch kept"

# The reference: a straight 3-host run resumed from a copy of the same checkpoint.
ref=$work/runs/ref
mkdir -p "$ref/checkpoints"
cp "$ckpt" "$ref/checkpoints/"
basename "$ckpt" >"$ref/checkpoints/latest"
timeout -k 5 180 "$fixture" run "$cluster_dir" srun --mpi=pmix -N3 -n3 --nodelist=h1,h2,h4 -t 5 "$dptrain" "$cfg" \
  --run-dir "$work/runs" --name ref "${common[@]}" >"$work/ref.out" 2>&1 ||
  { tail -n 20 "$work/ref.out" >&2; fail "the reference (srun -N3 from checkpoint step $S) failed"; }
grep -q "resumed from $ref/checkpoints/$(basename "$ckpt"): step $S," "$ref/logs/rank-0.log" ||
  fail "the reference did not resume from its copy of step $S"
"$diffckpt" "$ref/final.safetensors" "$run/final.safetensors" >"$work/diff.out" 2>&1 ||
  { sed 's/^/  | /' "$work/diff.out" >&2; fail "final.safetensors of the shrunk job differs from the straight 3-host run's"; }
say "ok   final.safetensors identical to a straight 3-host run from checkpoint step $S (diffckpt exit 0)"

# --- whole: --min-nodes 4 and a host lost: the job stops naming it
stop_hosts_cluster
start_hosts_cluster
say "cluster started afresh"
run=$work/runs/whole
submit whole 4
crash_when_checkpointed "$run" h4
state=$(wait_job "$run" 180)
[ "$state" = FAILED ] || job_fail "$run" "job $job ended '$state', not FAILED"
batch=$run/logs/slurm-$job.out
job=""
expect "the batch log does not name the missing host h4" \
  grep -qE '^dptrain submit: job [0-9]+ has 3 node\(s\) up \(h1 h2 h3\); missing: h4 \(down or not responding\); --min-nodes 4 needs 4: not restarting\.' "$batch"
expect "metrics.jsonl has a restart line" test "$(grep -c '"split":"restart"' "$run/metrics.jsonl")" = 0
report "$run" "the --min-nodes 4 job did not stop with the missing host named"
say "ok   whole: --min-nodes 4 stops naming h4"

echo "total $((SECONDS - t_start)) s"
echo "PASS"
