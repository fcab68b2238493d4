#!/usr/bin/env bash
# Integration test: data-parallel training end to end on Fashion-MNIST (models/fmnist_cnn.cfg,
# CI-sized: a slice of the data, one epoch, SyncBN on), the same run four ways:
#   ref    1 process at batch 2b                                  (the reference)
#   nproc  dptrain --nproc 2 at per-rank batch b                  (local launcher, env bootstrap)
#   pmix   srun --mpi=pmix -N2 -n2 dptrain ... at batch b         (tools/slurm/fixture.sh cluster)
#   pmi2   srun --mpi=pmi2 -N2 -n2 dptrain ... at batch b
# For every distributed run: exit status 0; logs/rank-0.log and logs/rank-1.log exist (both ranks
# ran; srun can exit 0 after a failed launch); metrics.jsonl's last eval line has the full eval
# split and top-1 within $TOL of the reference's; `diffckpt --all <run>/replicas` exits 0 (every
# rank's replica equals rank 0's, bit for bit: with SyncBN the running statistics agree too).
# With SyncBN, 2 ranks x b compute what 1 rank x 2b computes, up to fp32 summation order.
# Needs root, the Slurm/munge/PMIx packages and dataset-fashion-mnist (tools/setup.sh installs
# them); FAILS, not skips, without them. Usage: bash tests/integration/test_ddp_fmnist.sh BUILD_DIR
# (from the repo root, as ctest runs it).
set -uo pipefail

build=${1:?usage: test_ddp_fmnist.sh BUILD_DIR}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "$build" && pwd)
dptrain=$build/dptrain
diffckpt=$build/diffckpt
fixture=$repo/tools/slurm/fixture.sh
cfg=$repo/models/fmnist_cnn.cfg
data=/usr/share/datasets/fashion-mnist
t_start=$SECONDS

B=${DDP_FMNIST_BATCH:-32}    # per-rank batch of the 2-rank runs; the reference uses 2B
TOL=0.01                     # |top1(run) - top1(ref)| allowed
N_TRAIN=3072
STEPS=$((N_TRAIN / (2 * B)))  # one epoch
# 3072 samples / 64 per step = 48 steps; 1000 eval samples. Each run takes about 15-30 s here.
# (`--set` takes every value up to the next flag: it comes last on the command line.)
# Log level info: every rank's log then ends with its "done:" line, which the checks look for.
common=(--log-level info --set data.train_limit=$N_TRAIN data.eval_limit=1000 train.epochs=1 train.warmup_steps=8
        model.sync_bn=true checkpoint.replicas=true)

fail() { echo "FAIL: $*" >&2; exit 1; }
# shellcheck source=tests/integration/slurm_env.sh
. "$(dirname "${BASH_SOURCE[0]}")/slurm_env.sh"

# --- prerequisites: a clear failure, never a skip
[ -x "$dptrain" ] || fail "$dptrain not built (cmake --build $build --target dptrain)"
[ -x "$diffckpt" ] || fail "$diffckpt not built (cmake --build $build --target diffckpt)"
[ -f "$data/train-images-idx3-ubyte.gz" ] || fail "no Fashion-MNIST in $data (apt-get install dataset-fashion-mnist)"
require_slurm

# --- a clean environment: nothing from an enclosing Slurm job or launcher
clean_launch_env
# Two ranks share this machine's cores; spinning OpenMP waits would steal them from each other.
export OMP_WAIT_POLICY=passive

work=$(mktemp -d /tmp/dptrain-ddp-fmnist.XXXXXX)
chmod 0755 "$work"  # the fixture's munged runs as the munge user and must reach $work/slurm/munge
cluster_started=0
cleanup() {
  if [ $cluster_started -eq 1 ]; then
    "$fixture" stop "$work/slurm" || echo "warning: fixture stop failed for $work/slurm" >&2
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# top1_of RUN: top-1 of metrics.jsonl's last eval line ("" when there is none). Lines are
# nlohmann::json dumps: {"epoch":1,...,"split":"eval",...,"top1":0.8,...}.
top1_of() {
  grep '"split":"eval"' "$1/metrics.jsonl" 2>/dev/null | tail -n 1 | sed -nE 's/.*"top1":([-0-9.eE+]+).*/\1/p'
}
samples_of() {
  grep '"split":"eval"' "$1/metrics.jsonl" 2>/dev/null | tail -n 1 | sed -nE 's/.*"samples":([0-9]+).*/\1/p'
}

show_outputs() {
  local name=$1 run=$2 f
  echo "  --- output of $name (last 30 lines)" >&2
  tail -n 30 "$work/$name.out" | sed 's/^/  | /' >&2
  for f in "$run"/logs/rank-*.log; do
    [ -f "$f" ] || continue
    echo "  --- $f (last 10 lines)" >&2
    tail -n 10 "$f" | sed 's/^/  | /' >&2
  done
}

# run_train NAME BATCH THREADS [LAUNCHER...] [-- DPTRAIN_FLAGS...]: `LAUNCHER dptrain cfg
# DPTRAIN_FLAGS ...` trains into $work/runs/NAME (run.name = NAME); output in $work/NAME.out;
# returns dptrain's (or srun's) exit status.
run_train() {
  local name=$1 batch=$2 threads=$3 t0=$SECONDS rc launcher=() flags=()
  shift 3
  while [ $# -gt 0 ] && [ "$1" != -- ]; do launcher+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  flags=("$@")
  timeout -k 10 240 "${launcher[@]}" "$dptrain" "${flags[@]}" "$cfg" --run-dir "$work/runs" --name "$name" \
    "${common[@]}" train.batch_size="$batch" train.threads="$threads" >"$work/$name.out" 2>&1
  rc=$?
  echo "     $name: exit $rc in $((SECONDS - t0)) s"
  return $rc
}

# --- the reference: one process at batch 2B, both cores
run_train ref $((2 * B)) 0 || { show_outputs ref "$work/runs/ref"; fail "the 1-process reference run failed"; }
ref_top1=$(top1_of "$work/runs/ref")
ref_samples=$(samples_of "$work/runs/ref")
[ -n "$ref_top1" ] || { show_outputs ref "$work/runs/ref"; fail "the reference wrote no eval line to metrics.jsonl"; }
[ "$ref_samples" = 1000 ] || fail "the reference evaluated $ref_samples samples, not the 1000 asked"
# It must have learnt (about 0.80 here; chance is 0.10), or agreeing with it proves little.
awk -v a="$ref_top1" 'BEGIN { exit !(a >= 0.70) }' || fail "the reference reached eval top1 $ref_top1 < 0.70: it did not learn"
echo "ok   ref: 1 process x batch $((2 * B)): eval top1 $ref_top1"

failures=0
# check_run NAME RC KIND: the checks every distributed run must pass (RC its exit status, KIND
# the bootstrap rank 0 must report: env, pmix, pmi2); prints one ok/FAIL line.
check_run() {
  local name=$1 rc=$2 kind=$3 run=$work/runs/$1 errs=() top1 samples r d="" ran_ok=1 line
  [ "$rc" -eq 0 ] || { errs+=("exit status $rc, not 0"); ran_ok=0; }
  grep -q "2 ranks via the $kind bootstrap" "$work/$name.out" ||
    errs+=("rank 0 did not report '2 ranks via the $kind bootstrap' (another bootstrap, or no rank 0)")
  for r in 0 1; do
    if [ ! -f "$run/logs/rank-$r.log" ]; then
      errs+=("no logs/rank-$r.log: rank $r did not run")
      ran_ok=0
    elif ! grep -q '\[rank '"$r"'/2 .*done: '"$STEPS"' steps' "$run/logs/rank-$r.log"; then
      errs+=("logs/rank-$r.log has no 'done: $STEPS steps' line of rank $r/2: it did not finish as rank $r of 2")
      ran_ok=0
    fi
  done
  [ -e "$run/logs/rank-2.log" ] && errs+=("a logs/rank-2.log exists: more than 2 ranks ran")
  top1=$(top1_of "$run")
  samples=$(samples_of "$run")
  if [ -z "$top1" ]; then
    errs+=("no eval line in $run/metrics.jsonl")
  else
    d=$(awk -v a="$top1" -v b="$ref_top1" 'BEGIN { d = a - b; if (d < 0) d = -d; printf "%.4f", d }')
    echo "     $name: eval top1 $top1, reference $ref_top1, |diff| $d (allowed $TOL)"
    [ "$samples" = 1000 ] || errs+=("eval counted $samples samples, not 1000 (distributed eval must count each once)")
    awk -v d="$d" -v t="$TOL" 'BEGIN { exit !(d <= t) }' ||
      errs+=("eval top1 $top1 vs reference $ref_top1: |diff| $d > $TOL")
  fi
  for r in 0 1; do
    [ -f "$run/replicas/replica-rank$r.safetensors" ] || errs+=("no replicas/replica-rank$r.safetensors")
  done
  if ! "$diffckpt" --all "$run/replicas" >"$work/$name.diff" 2>&1; then
    errs+=("diffckpt --all <run>/replicas exits non-zero: the ranks' replicas differ (with model.sync_bn = true every tensor, BN running statistics included, must be identical):")
    while IFS= read -r line; do errs+=("    | $line"); done < <(grep -vE '^(note|identical):' "$work/$name.diff" | head -n 12)
  fi
  if [ ${#errs[@]} -eq 0 ]; then
    echo "ok   $name: exit 0, $kind bootstrap, ranks 0 and 1 finished, top1 within $TOL of the reference, replicas identical"
  else
    echo "FAIL $name:" >&2
    printf '  - %s\n' "${errs[@]}" >&2
    [ $ran_ok -eq 1 ] || show_outputs "$name" "$run"
    failures=$((failures + 1))
  fi
}

# --- 2 local processes (the launcher's env bootstrap)
# One thread per rank: the two ranks share the machine's two cores.
run_train nproc "$B" 1 -- --nproc 2
rc=$?
check_run nproc $rc env

# --- the Slurm fixture: a port block and job ids of our own, apart from test_slurm_probe.sh's
export SLURM_FIXTURE_PORT=${SLURM_FIXTURE_PORT:-$((19000 + ($$ % 200) * 10))}
export SLURM_FIXTURE_FIRST_JOB_ID=${SLURM_FIXTURE_FIRST_JOB_ID:-$((1000 + ($$ % 300) * 3))}
cluster_started=1
exports=$("$fixture" start "$work/slurm") || fail "the Slurm fixture did not start (see above)"
eval "$exports"
[ -n "${SLURM_CONF:-}" ] || fail "fixture printed no SLURM_CONF ('$exports')"
echo "     cluster up: SLURM_CONF=$SLURM_CONF"

# One rank per "node" (both "nodes" are this machine), one thread each.
for mpi in pmix pmi2; do
  run_train "$mpi" "$B" 1 srun --mpi="$mpi" -N2 -n2 -t 4
  rc=$?
  check_run "$mpi" $rc "$mpi"
done

echo "total $((SECONDS - t_start)) s"
[ $failures -eq 0 ] || fail "$failures of 3 distributed runs wrong (details above)"
echo "PASS"
