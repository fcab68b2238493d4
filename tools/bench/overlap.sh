#!/usr/bin/env bash
# overlap.sh: how much gradient communication the bucketed all-reduce hides behind backward, on
# this machine's CPU with 2 ranks (`dptrain --nproc 2`, ring backend): the same run with
# dist.overlap = true (buckets reduced while backward goes on) and false (reduced after backward).
# A benchmark, not a test.
#
#   tools/bench/overlap.sh [BUILD_DIR]        (default: build; needs BUILD_DIR/dptrain)
#
# Environment: MODEL (fmnist_cnn: models/fmnist_cnn.cfg on Fashion-MNIST; cifar_resnet18: that
# preset on synthetic 3x32x32 data, 11 M parameters, so 45 MB of gradients a step), STEPS (40),
# BATCH (per rank; 32 for fmnist_cnn, 8 for cifar_resnet18), SKIP (5: the first steps, warm-up,
# are left out of the means), REPEAT (2: the two modes alternate REPEAT times; each mode's best
# run, by mean step time, is reported: on a shared machine one run is noisy), THREADS (1 per
# rank), EXTRA (more `section.key=value` overrides, space-separated).
#
# Reads the train lines of <run>/metrics.jsonl, one per step (train.log_every = 1), and their
# fields step_time_s (wall time of the step), comm_exposed_s (time the step waited for
# communication: after backward, until the last bucket was reduced) and comm_total_s (time the
# buckets' all-reduces took, wherever they ran). Lines from every rank count. Prints per mode:
# mean step time, mean exposed and total communication, and the hidden share
# 1 - exposed / total (the part of communication that ran behind backward).
# Exit status: 0, 1 when a run fails, 2 on a usage error or when metrics.jsonl lacks a field.
set -euo pipefail

BUILD=${1:-build}
MODEL=${MODEL:-fmnist_cnn}
STEPS=${STEPS:-40}
SKIP=${SKIP:-5}
REPEAT=${REPEAT:-2}
THREADS=${THREADS:-1}
EXTRA=${EXTRA:-}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DPTRAIN=$BUILD/dptrain
FIELDS=(step_time_s comm_exposed_s comm_total_s)

die() { echo "overlap: $*" >&2; exit "${2:-2}"; }
[[ -x $DPTRAIN ]] || die "$DPTRAIN is not built (cmake --build $BUILD --target dptrain)"
[[ $STEPS -gt $SKIP ]] || die "STEPS ($STEPS) must exceed SKIP ($SKIP)"

case $MODEL in
  fmnist_cnn)
    BATCH=${BATCH:-32}
    CFG=$REPO/models/fmnist_cnn.cfg
    SETS=(data.train_limit=$((STEPS * BATCH * 2)) data.eval_limit=256 train.warmup_steps=0) ;;
  cifar_resnet18)
    BATCH=${BATCH:-8}
    CFG=$REPO/models/cifar_resnet18.cfg
    SETS=(data.dataset=synthetic 'data.synthetic_shape=[3,32,32]' data.synthetic_classes=10
          data.synthetic_train=$((STEPS * BATCH * 2)) data.synthetic_eval=16 train.warmup_steps=0) ;;
  *) die "MODEL = '$MODEL': fmnist_cnn or cifar_resnet18" ;;
esac
# One step per metrics line; no checkpoints beyond the final one.
# shellcheck disable=SC2206
SETS+=(train.steps=$STEPS train.batch_size=$BATCH train.threads=$THREADS train.log_every=1 checkpoint.final=false $EXTRA)

TMP=$(mktemp -d /tmp/dptrain-overlap.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
export OMP_WAIT_POLICY=passive  # two ranks on few cores: no spinning OpenMP waits

# means FILE: "n step exposed total" — the means over the train lines after the first SKIP steps.
means() {
  awk -v skip="$SKIP" '
    function field(name,   m) {
      if (match($0, "\"" name "\":[-0-9.eE+]+")) return substr($0, RSTART + length(name) + 3, RLENGTH - length(name) - 3) + 0
      return ""
    }
    /"split":"train"/ {
      s = field("step"); if (s == "" || s <= skip) next
      n++; st += field("step_time_s"); ex += field("comm_exposed_s"); tot += field("comm_total_s")
    }
    END { if (n == 0) { print "0 0 0 0"; exit } printf "%d %.9f %.9f %.9f\n", n, st / n, ex / n, tot / n }' "$1"
}

# run_mode OVERLAP I: one run; prints its means line.
run_mode() {
  local overlap=$1 i=$2 run=$TMP/runs rc=0
  local name=overlap-$overlap-$i
  "$DPTRAIN" --nproc 2 "$CFG" --run-dir "$run" --name "$name" --log-level warn \
    --set "${SETS[@]}" dist.overlap="$overlap" >"$TMP/$name.out" 2>&1 || rc=$?
  if [[ $rc -ne 0 ]]; then
    tail -n 20 "$TMP/$name.out" >&2
    die "dptrain --nproc 2 with dist.overlap=$overlap failed (exit $rc); output above" 1
  fi
  local metrics=$run/$name/metrics.jsonl line f
  line=$(grep -m1 '"split":"train"' "$metrics" 2>/dev/null) || die "no train line in $metrics" 1
  for f in "${FIELDS[@]}"; do
    [[ $line == *"\"$f\":"* ]] ||
      die "metrics.jsonl train lines have no '$f' field (the trainer does not write it yet; needed: ${FIELDS[*]}); first line: $line"
  done
  means "$metrics"
}

echo "overlap: MODEL=$MODEL, 2 ranks x batch $BATCH, $STEPS steps (first $SKIP left out), $THREADS thread(s) per rank, best of $REPEAT" >&2
declare -A best
for i in $(seq "$REPEAT"); do
  for overlap in true false; do
    m=$(run_mode "$overlap" "$i")
    echo "  run $i overlap=$overlap: $m" >&2
    read -r _ st _ _ <<<"$m"
    if [[ -z ${best[$overlap]:-} ]] || awk -v a="$st" -v b="$(cut -d' ' -f2 <<<"${best[$overlap]}")" 'BEGIN { exit !(a < b) }'; then
      best[$overlap]=$m
    fi
  done
done

# lines: the train lines averaged (steps after SKIP, times the ranks that write metrics.jsonl).
printf '%-8s %6s %14s %18s %16s %13s\n' overlap lines "step (ms)" "comm exposed (ms)" "comm total (ms)" "hidden share"
for overlap in true false; do
  read -r n st ex tot <<<"${best[$overlap]}"
  awk -v o="$overlap" -v n="$n" -v st="$st" -v ex="$ex" -v tot="$tot" 'BEGIN {
    share = tot > 0 ? sprintf("%.1f %%", 100 * (1 - ex / tot)) : "n/a"
    printf "%-8s %6d %14.2f %18.2f %16.2f %13s\n", o, n, 1000 * st, 1000 * ex, 1000 * tot, share }'
done
