#!/usr/bin/env bash
# Integration test: preemption end to end on the local Slurm fixture (tools/slurm/fixture.sh).
#   ref   dptrain --nproc 2: 2 ranks x batch B, STEPS steps straight (the reference)
#   job   dptrain submit --nodes 2 (CPU nodes, one task each: srun --mpi=pmix in the script),
#         the same cfg; once both ranks have logged step $SIGNAL_AFTER, `scancel --signal=USR1 JOB`
#         (without --batch/--full scancel signals the job's steps, i.e. the dptrain tasks, not
#         the batch shell: what `#SBATCH --signal=USR1@90` does before a time limit).
# The job must: stop both ranks after the same step N with checkpoint step-N (`latest` names
# it); rank 0 must `scontrol requeue` it (its log says so; `scontrol show job` then counts
# Restarts=1; the requeue's own SIGTERM to every process of the job must not kill scontrol before
# it answers, as it did in CI on 2026-11-30); the requeued job (same id, same script)
# must resume from step-N on both ranks ("resumed from .../step-N.safetensors: step N") and
# finish; its final.safetensors must equal the reference's bit for bit (diffckpt exits 0). The job
# runs the cfg snapshot `submit` took: the cfg it was given is overwritten with garbage right
# after the submission, before the job starts and again before the requeue, and the job must not
# notice.
# A requeued job waits for the job credential to expire before it may start again (slurm.conf
# AuthInfo cred_expire, 120 s by default: "this also controls how long a requeued job must wait
# before starting again"; `scontrol show job` shows Reason=BeginTime). `scontrol update
# StartTime=now` does not shorten the wait: slurmd still holds the old run's credential as
# revoked and the controller kills the job ("non-startable batch job: Job credential revoked").
# So this test's cluster has cred_expire = $CRED_EXPIRE s (SLURM_FIXTURE_CRED_EXPIRE) and waits.
# Needs root, the Slurm/munge/PMIx packages and dataset-fashion-mnist (tools/setup.sh installs
# them); FAILS, not skips, without them. About 20-30 s on 2 shared cores.
# Usage: bash tests/integration/test_submit_requeue.sh BUILD_DIR (from the repo root, as ctest).
set -uo pipefail

build=${1:?usage: test_submit_requeue.sh BUILD_DIR}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "$build" && pwd)
dptrain=$build/dptrain
diffckpt=$build/diffckpt
fixture=$repo/tools/slurm/fixture.sh
cfg=$repo/models/fmnist_mlp.cfg
data=/usr/share/datasets/fashion-mnist
t_start=$SECONDS

B=32
STEPS=1000          # about 3-9 s of training for 2 ranks on this machine's 2 shared cores
SIGNAL_AFTER=20     # scancel once both ranks logged this step
# train.log_every=1: the rank logs are flushed to disk when spdlog's buffer fills (or at a
# warning), so with a line every step they show step 20 at about step 30, not at step ~260.
CRED_EXPIRE=10      # seconds: the requeued job starts about this long after the requeue (see above)
# (`--set` takes every value up to the next flag: it comes last on the command line.)
common=(--log-level info --set 'model.hidden=[256,256]' data.train_limit=4096 data.eval_limit=256
        train.steps=$STEPS train.batch_size=$B train.optimizer=sgd train.lr=0.01 train.momentum=0.9
        train.threads=1 train.log_every=1 checkpoint.keep=0)

fail() { echo "FAIL: $*" >&2; exit 1; }
# shellcheck source=tests/integration/slurm_env.sh
. "$(dirname "${BASH_SOURCE[0]}")/slurm_env.sh"
say() { echo "     $* ($((SECONDS - t_start)) s)"; }

# --- prerequisites: a clear failure, never a skip
[ -x "$dptrain" ] || fail "$dptrain not built (cmake --build $build --target dptrain)"
[ -x "$diffckpt" ] || fail "$diffckpt not built (cmake --build $build --target diffckpt)"
[ -f "$data/train-images-idx3-ubyte.gz" ] || fail "no Fashion-MNIST in $data (apt-get install dataset-fashion-mnist)"
require_slurm sbatch scancel scontrol squeue

# --- a clean environment: nothing from an enclosing Slurm job or launcher
clean_launch_env
export OMP_WAIT_POLICY=passive

work=$(mktemp -d /tmp/dptrain-submit-requeue.XXXXXX)
chmod 0755 "$work"  # the fixture's munged runs as the munge user and must reach $work/slurm/munge
cluster_started=0
job=""
cleanup() {
  if [ -n "$job" ] && [ -n "${SLURM_CONF:-}" ]; then scancel "$job" >/dev/null 2>&1 || true; fi
  if [ $cluster_started -eq 1 ]; then
    "$fixture" stop "$work/slurm" || echo "warning: fixture stop failed for $work/slurm" >&2
  fi
  if [ "${KEEP_WORK:-0}" = 1 ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

run=$work/runs/job
show_job() {
  local f
  echo "  --- scontrol show job $job" >&2
  scontrol show job "$job" 2>&1 | sed 's/^/  | /' >&2
  for f in "$run"/logs/*; do
    [ -f "$f" ] || continue
    echo "  --- $f (last 15 lines)" >&2
    tail -n 15 "$f" | sed 's/^/  | /' >&2
  done
  echo "  --- slurmctld.log (last 15 lines)" >&2
  tail -n 15 "$work/slurm/log/slurmctld.log" 2>/dev/null | sed 's/^/  | /' >&2
}
job_fail() { show_job; fail "$@"; }

# job_field NAME: NAME=value from `scontrol show job` ("" when the job is gone).
job_field() { scontrol show job "$job" 2>/dev/null | grep -oE "(^| )$1=[^ ]*" | head -n1 | sed -E "s/^ ?$1=//"; }

# last_step RANK: the highest "step S/STEPS" the rank logged (0 if none).
last_step() {
  local s
  s=$(grep -oE " step [0-9]+/$STEPS loss" "$run/logs/rank-$1.log" 2>/dev/null | tail -n1 | grep -oE '[0-9]+/' | tr -d /)
  echo "${s:-0}"
}

# --- the reference: 2 local processes, straight through
t0=$SECONDS
timeout -k 10 180 "$dptrain" --nproc 2 "$cfg" --run-dir "$work/runs" --name ref "${common[@]}" >"$work/ref.out" 2>&1 ||
  { tail -n 30 "$work/ref.out" >&2; fail "the reference run (dptrain --nproc 2) failed"; }
[ -f "$work/runs/ref/final.safetensors" ] || fail "the reference wrote no final.safetensors"
say "ok   ref: dptrain --nproc 2, $STEPS steps in $((SECONDS - t0)) s"

# --- the cluster: a port block and job ids of our own, apart from the other integration tests
export SLURM_FIXTURE_PORT=${SLURM_FIXTURE_PORT:-$((21000 + ($$ % 200) * 10))}
export SLURM_FIXTURE_FIRST_JOB_ID=${SLURM_FIXTURE_FIRST_JOB_ID:-$((5000 + ($$ % 300) * 3))}
export SLURM_FIXTURE_CRED_EXPIRE=$CRED_EXPIRE
cluster_started=1
exports=$("$fixture" start "$work/slurm") || fail "the Slurm fixture did not start (see above)"
eval "$exports"
[ -n "${SLURM_CONF:-}" ] || fail "fixture printed no SLURM_CONF ('$exports')"
say "cluster up: SLURM_CONF=$SLURM_CONF"

# --- submit: 2 CPU nodes x 1 task (the script's srun --mpi=pmix starts the 2 ranks)
cd "$work" || fail "cannot cd to $work"
cp "$cfg" "$work/job.cfg"
"$dptrain" submit --nodes 2 --gpus-per-node 0 --ntasks-per-node 1 "$work/job.cfg" --run-dir "$work/runs" --name job \
  "${common[@]}" >"$work/submit.out" 2>&1 || { cat "$work/submit.out" >&2; fail "dptrain submit failed"; }
echo "garbage [ not a cfg" >"$work/job.cfg"  # the job runs its snapshot, not this file
job=$(sed -nE 's/^dptrain: submitted batch job ([0-9]+) .*/\1/p' "$work/submit.out")
[ -n "$job" ] || { cat "$work/submit.out" >&2; fail "dptrain submit printed no 'submitted batch job N'"; }
[ -f "$run/submit.sbatch" ] || fail "no $run/submit.sbatch"
grep -q -- '--signal=USR1@90' "$run/submit.sbatch" && grep -q -- '--requeue' "$run/submit.sbatch" ||
  fail "submit.sbatch lacks --signal=USR1@90 or --requeue"
say "submitted job $job"

# --- wait until it runs and both ranks are past step SIGNAL_AFTER (stop handlers installed)
# (The logs are polled every 20 ms; the job's state, a slower scontrol call, about every second.)
deadline=$((SECONDS + 90))
polls=0
until [ "$(last_step 0)" -ge $SIGNAL_AFTER ] && [ "$(last_step 1)" -ge $SIGNAL_AFTER ]; do
  if [ $((polls++ % 50)) -eq 0 ]; then
    state=$(job_field JobState)
    case "$state" in
      PENDING|CONFIGURING|RUNNING) ;;
      *) job_fail "job $job is '$state' before both ranks logged step $SIGNAL_AFTER" ;;
    esac
  fi
  [ $SECONDS -lt $deadline ] || job_fail "both ranks did not log step $SIGNAL_AFTER within 90 s (job state $state)"
  sleep 0.02
done
say "running: rank 0 at step $(last_step 0), rank 1 at step $(last_step 1); scancel --signal=USR1 $job"
scancel --signal=USR1 "$job" || job_fail "scancel --signal=USR1 $job failed"

# --- both ranks stop after the same step, checkpoint, and rank 0 requeues the job
stop_step() { sed -nE 's/.*stopping after step ([0-9]+): .*; writing a checkpoint.*/\1/p' "$run/logs/rank-$1.log" | head -n1; }
deadline=$((SECONDS + 60))
until [ -n "$(stop_step 0)" ] && [ -n "$(stop_step 1)" ] && grep -q "requeued (scontrol requeue $job)" "$run/logs/rank-0.log"; do
  if grep -q "scontrol requeue $job' failed\|scontrol requeue $job' was killed\|nothing to requeue" "$run/logs/rank-0.log" 2>/dev/null; then
    job_fail "rank 0 could not requeue the job (its log above)"
  fi
  [ $SECONDS -lt $deadline ] || job_fail "the ranks did not stop with a checkpoint and a requeue within 60 s of SIGUSR1"
  sleep 0.1
done
n0=$(stop_step 0)
n1=$(stop_step 1)
[ "$n0" = "$n1" ] || job_fail "rank 0 stopped after step $n0, rank 1 after step $n1: they must agree"
N=$n0
[ "$N" -lt $STEPS ] || job_fail "the job stopped at step $N = the end: the signal came too late (make STEPS larger)"
ckpt=$(printf '%s/checkpoints/step-%08d.safetensors' "$run" "$N")
say "ok   stopped: both ranks after step $N; rank 0 requeued job $job"

# --- the requeued job: pending (Reason=BeginTime, for CRED_EXPIRE s) -> running -> done
deadline=$((SECONDS + 60 + CRED_EXPIRE))
restarts=""
seen_pending=0
while :; do
  state=$(job_field JobState)
  r=$(job_field Restarts)
  [ -n "$r" ] && [ "$r" != 0 ] && restarts=$r
  case "$state" in
    PENDING)
      [ $seen_pending -eq 1 ] || say "job $job pending again (Restarts=$r, Reason=$(job_field Reason), StartTime=$(job_field StartTime))"
      seen_pending=1 ;;
    COMPLETED) break ;;
    COMPLETING|RUNNING|CONFIGURING|REQUEUED) ;;
    "") job_fail "job $job vanished before it was seen COMPLETED" ;;
    *) job_fail "job $job is '$state' (neither requeued nor completed)" ;;
  esac
  [ $SECONDS -lt $deadline ] || job_fail "the requeued job did not complete within $((60 + CRED_EXPIRE)) s (state $state)"
  sleep 0.2
done
say "job $job COMPLETED"
[ "$restarts" = 1 ] || job_fail "scontrol show job counted Restarts='$restarts', expected 1"

# --- what the ranks say, what the run directory holds
errs=()
for r in 0 1; do
  log=$run/logs/rank-$r.log
  grep -q "resumed from $ckpt: step $N," "$log" || errs+=("logs/rank-$r.log has no 'resumed from $ckpt: step $N'")
  grep -q "done: $STEPS steps" "$log" || errs+=("logs/rank-$r.log has no 'done: $STEPS steps' line")
  grep -q "stopping after step $N: \(User defined signal 1 received\|another rank received User defined signal 1\);" "$log" ||
    errs+=("logs/rank-$r.log does not say why it stopped (SIGUSR1)")
done
[ -f "$ckpt" ] || errs+=("no checkpoint $ckpt")
[ "$(cat "$run/checkpoints/latest" 2>/dev/null)" = "$(printf 'step-%08d.safetensors' $STEPS)" ] ||
  errs+=("checkpoints/latest is '$(cat "$run/checkpoints/latest" 2>/dev/null)' after the requeued run, not step $STEPS")
[ -f "$run/final.safetensors" ] || errs+=("no $run/final.safetensors")
[ -e "$run/logs/rank-2.log" ] && errs+=("a logs/rank-2.log exists: more than 2 ranks ran")
if [ ${#errs[@]} -gt 0 ]; then
  printf '  - %s\n' "${errs[@]}" >&2
  job_fail "the requeued job did not resume and finish as it should"
fi
say "ok   resumed: both ranks from $ckpt, done at step $STEPS"

# --- bitwise equal to the straight run
if ! "$diffckpt" "$work/runs/ref/final.safetensors" "$run/final.safetensors" >"$work/diff.out" 2>&1; then
  sed 's/^/  | /' "$work/diff.out" >&2
  fail "final.safetensors of the requeued job differs from the straight run's (diffckpt above)"
fi
"$diffckpt" "$work/runs/ref/checkpoints/step-$(printf '%08d' $STEPS).safetensors" \
  "$run/checkpoints/step-$(printf '%08d' $STEPS).safetensors" >"$work/diff2.out" 2>&1 ||
  { sed 's/^/  | /' "$work/diff2.out" >&2; fail "the final checkpoints (weights and optimizer state) differ"; }
say "ok   final.safetensors and step-$STEPS identical to the straight run (diffckpt exit 0)"

echo "total $((SECONDS - t_start)) s"
echo "PASS"
