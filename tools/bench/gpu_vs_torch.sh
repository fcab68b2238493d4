#!/usr/bin/env bash
# gpu_vs_torch.sh: dptrain against PyTorch, one training step on the same model, batch and dtype,
# on one GPU. A benchmark, not a test. Prints one table last (and writes it to LOGDIR/table.txt).
#
#   tools/bench/gpu_vs_torch.sh [BUILD_DIR]      (default: build; needs BUILD_DIR/dptrain, CUDA build)
#
# Per case MODEL:BATCH:DTYPE (steps 1, 2 and 2b for every case first, then 2c, then 3, so that a
# slow torch.compile cannot cost a dptrain number when the time runs out):
#   1. PyTorch eager (tools/bench/torch_train_bench.py --modes eager): AMP + channels_last for
#      bf16/fp16, data resident on the GPU, PyTorch's default TF32 policy for fp32 (convolutions
#      yes, matmuls no); its images/s sizes the dptrain run.
#   2. dptrain on synthetic data of the model's shape (data.dataset = "synthetic", no augmentation:
#      tools/bench/models.sh's synthetic_sets) with its batches made on the GPU
#      (data.synthetic_device = "cuda"), as torch's inputs are resident: the judged figure; fp32
#      with train.tf32 = "conv", torch's policy. train.steps for about DPTRAIN_SECONDS at torch
#      eager's speed, train.log_every = steps/20;
#      images/s = median samples_per_s of the metrics.jsonl windows after the first 20% of the
#      steps (tools/bench/bench_report.py); peak = the run's {"split":"device"} line.
#      With TRACE_STEPS > 0 (default 5) steps in the middle of the run are traced
#      (profile.trace_steps): the run's trace.json shows where a step's time goes (data wait,
#      forward, backward, optimizer).
#   2b. For each case of a variant's models, dptrain once more per VARIANTS entry (below), the
#      same run with the variant's cfg overrides: one more row of the table each.
#   2c. With E2E=1 (default), every case's dptrain run once more fed by its CPU loader and input
#      pipeline (data.synthetic_device = "cpu"): the end-to-end figure, beside the judged one.
#   3. PyTorch torch.compile (--modes compile; the compile time is in the log, not in images/s).
# Models: resnet50 (models/resnet50.cfg, 3x224x224, 1000 classes), cifar_resnet18
# (models/cifar_resnet18.cfg, 3x32x32), fmnist_cnn (models/fmnist_cnn.cfg, 1x28x28), gpt2
# (models/gpt2.cfg, GPT-2 124M; not in the default CASES: synthetic token windows made on the GPU,
# end to end a shard of random tokens that make_token_shard writes first); the optimizer is the
# cfg's on both sides.
#
# Environment:
#   CASES            "MODEL:BATCH:DTYPE ..." (default "resnet50:256:bf16 cifar_resnet18:128:bf16
#                    fmnist_cnn:128:bf16"); DTYPE is bf16, fp16 or fp32
#   MODES            torch modes (default "eager compile")
#   DPTRAIN_SECONDS  target length of a dptrain run (default 15)
#   TORCH_SECONDS    timed part of a torch mode (default 8)
#   TRACE_STEPS      dptrain steps traced into <run>/trace.json (default 5; 0: none)
#   VARIANTS         dptrain variants of the VARIANT_MODELS cases (default none):
#                    "label:key=v,key=v;label2:key=v", e.g. "graph:train.cudnn_api=graph;
#                    graph-own-bn:train.cudnn_api=graph,train.bn_impl=own"; "label@gpt2:..."
#                    (models joined by '+') runs on those models' cases instead. Any cfg key; a variant
#                    whose key this dptrain does not know (exit 2, "unknown key") is reported in
#                    its row as unknown_key, not as a failure. Syntax: bench_report.py variants.
#   VARIANT_MODELS   the models whose cases the variants without '@' run on (default "resnet50")
#   E2E              1 (default): also the end-to-end dptrain run of every case (step 2c); 0: not
#   DEADLINE         epoch second by which everything must have ended (default: now + 540); each
#                    step's time box is cut to it, and a step that no longer fits is skipped
#   LOGDIR           logs, run directories, results.txt and table.txt (default: a new /tmp folder)
#   PY               the python with torch (default python3)
#   DPTRAIN_LD_LIBRARY_PATH  LD_LIBRARY_PATH for dptrain alone (tools/gpu/run_all.sh sets it;
#                    python keeps its own environment)
#   SMOKE=1          plumbing check without a GPU: dptrain and torch on the CPU, tiny runs
#                    (CASES default "fmnist_cnn:8:fp32", VARIANT_MODELS "fmnist_cnn", torch
#                    --smoke, 12 dptrain steps)
# Exit status: 0 when every measurement gave status=ok (or unknown_key: a variant this build
# cannot run), 1 when one failed, was partial or was skipped for lack of time, 2 on a usage error.
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${1:-build}
SMOKE=${SMOKE:-0}
if [[ $SMOKE == 1 ]]; then
  CASES=${CASES:-fmnist_cnn:8:fp32}
  MODES=${MODES:-eager}
  VARIANT_MODELS=${VARIANT_MODELS:-fmnist_cnn}
  DEVICE=cpu
else
  CASES=${CASES:-resnet50:256:bf16 cifar_resnet18:128:bf16 fmnist_cnn:128:bf16}
  MODES=${MODES:-eager compile}
  VARIANT_MODELS=${VARIANT_MODELS:-resnet50}
  DEVICE=cuda
fi
DPTRAIN_SECONDS=${DPTRAIN_SECONDS:-15}
E2E=${E2E:-1}
TORCH_SECONDS=${TORCH_SECONDS:-8}
TRACE_STEPS=${TRACE_STEPS:-5}
VARIANTS=${VARIANTS:-}
DEADLINE=${DEADLINE:-$(($(date +%s) + 540))}
PY=${PY:-python3}
DPTRAIN=$BUILD/dptrain
REPORT=$REPO/tools/bench/bench_report.py
TORCH_BENCH=$REPO/tools/bench/torch_train_bench.py

die() { echo "gpu_vs_torch: $*" >&2; exit 2; }
say() { echo "[gpu_vs_torch $(date -u +%H:%M:%S)] $*" >&2; }
[[ -x $DPTRAIN ]] || die "$DPTRAIN is not built (a CUDA build: cmake -DCMAKE_CUDA_ARCHITECTURES=90; or tools/gpu/pack.sh)"
command -v "$PY" >/dev/null || die "no python '$PY' (set PY)"
command -v timeout >/dev/null || die "needs coreutils' timeout"
if [[ -z ${LOGDIR:-} ]]; then LOGDIR=$(mktemp -d /tmp/gpu-vs-torch.XXXXXX); fi
mkdir -p "$LOGDIR" || die "cannot make LOGDIR $LOGDIR"
RESULTS=$LOGDIR/results.txt
: >"$RESULTS"
failed=0

# shellcheck source=tools/bench/models.sh
source "$REPO/tools/bench/models.sh"  # model_info, synthetic_sets

# box WANT MIN: seconds for the next step, WANT cut to the deadline; prints 0 when under MIN.
box() {
  local left=$((DEADLINE - $(date +%s) - 5))
  local b=$(($1 < left ? $1 : left))
  if ((b < $2)); then echo 0; else echo "$b"; fi
}

# collect LOG: appends the log's RESULT lines to results.txt; fails unless there are some and all
# say ok (or unknown_key: a variant's key this dptrain does not have, reported in its row).
collect() {
  local lines
  lines=$(grep '^RESULT ' "$1")
  [[ -n $lines ]] && echo "$lines" >>"$RESULTS"
  [[ -n $lines ]] && ! grep -Ev ' status=(ok|unknown_key)( |$)' <<<"$lines" | grep -q .
}

# skipped TOOL MODEL BATCH DTYPE MODE WHY [VARIANT]: a RESULT line for something not run.
skipped() {
  echo "RESULT tool=$1 model=$2 batch=$3 dtype=$4 mode=$5 variant=${7:--} img_s=- step_ms=- peak_bytes=- status=skipped note=$6" >>"$RESULTS"
  say "skipped $1 $2 $4 $5${7:+ variant $7}: $6"
  failed=1
}

# torch_mode MODEL BATCH DTYPE MODE BOX_WANT
torch_mode() {
  local m=$1 b=$2 d=$3 mode=$4 t log=$LOGDIR/torch-$1-$2-$3-$4.log
  t=$(box "$5" 30)
  if ((t == 0)); then skipped torch "$m" "$b" "$d" "$mode" no_time_left; return; fi
  local extra=()
  [[ $SMOKE == 1 ]] && extra=(--smoke)
  say "torch $mode: $m batch $b $d (time box ${t}s) -> $log"
  local rc=0
  PYTHONUNBUFFERED=1 timeout -k 10 "$t" "$PY" "$TORCH_BENCH" --model "$m" --batch "$b" --dtype "$d" --modes "$mode" \
    --device "$DEVICE" --seconds "$TORCH_SECONDS" "${extra[@]}" >"$log" 2>&1 || rc=$?
  if ! grep -q '^RESULT ' "$log"; then
    local why=exit_status_$rc
    ((rc == 124 || rc == 137)) && why=time_box_${t}s_hit
    echo "RESULT tool=torch model=$m batch=$b dtype=$d mode=$mode img_s=- step_ms=- peak_bytes=- status=error note=$why" >>"$log"
    tail -n 5 "$log" >&2
  fi
  collect "$log" || failed=1
}

# dptrain_run MODEL BATCH DTYPE INPUT [VARIANT KEY=V...]: the dptrain side of a case with INPUT
# resident (batches made on the GPU) or loader (end to end), or of one of its variants (the same
# run with the variant's overrides last, so that they win).
dptrain_run() {
  local m=$1 b=$2 d=$3 input=$4 variant=${5:--} cfg guess
  shift $(($# < 5 ? $# : 5))
  local sets=("$@")
  read -r cfg _ _ _ _ guess <<<"$(model_info "$m")"
  local eager steps
  eager=$(grep "^RESULT tool=torch model=$m batch=$b dtype=$d mode=eager " "$RESULTS" | sed -n 's/.* img_s=\([0-9.]*\) .*/\1/p' | tail -n 1)
  [[ -n $eager ]] || eager=$guess
  if [[ $SMOKE == 1 ]]; then
    steps=12
  else
    steps=$(awk -v s="$DPTRAIN_SECONDS" -v r="$eager" -v b="$b" 'BEGIN { n = int(s * r / b + 0.5); if (n < 40) n = 40; if (n > 200000) n = 200000; print n }')
  fi
  local every=$((steps / 20 > 0 ? steps / 20 : 1)) trace=()
  ((TRACE_STEPS > 0)) && trace=(profile.trace_steps="$((steps / 2 + 1))-$((steps / 2 + TRACE_STEPS))")
  local t name=dptrain-$m-$b-$d
  [[ $input == loader ]] && name+=-e2e
  [[ $variant != - ]] && name+=-$variant
  local log=$LOGDIR/$name.log
  t=$(box $((3 * DPTRAIN_SECONDS + 60)) 20)
  if ((t == 0)); then skipped dptrain "$m" "$b" "$d" "$input" no_time_left "$variant"; return; fi
  say "dptrain ($input inputs): $m batch $b $d${sets[*]:+ with ${sets[*]}}, $steps steps, log_every $every (time box ${t}s) -> $log"
  local env_cmd=(env)
  [[ -n ${DPTRAIN_LD_LIBRARY_PATH:-} ]] && env_cmd+=("LD_LIBRARY_PATH=$DPTRAIN_LD_LIBRARY_PATH")
  local rc=0
  # `--set` takes every value up to the next option: it comes last.
  local base
  # gpt2 end to end: a shard of random tokens, as many windows as the run takes (resident: none)
  if [[ $m == gpt2 && $input == loader ]]; then
    export BENCH_TOKENS=$LOGDIR/gpt2-tokens.bin
    make_token_shard "$BENCH_TOKENS" $((steps * b * 1024 + 1)) "$PY" || die "could not write $BENCH_TOKENS"
  fi
  mapfile -t base < <(synthetic_sets "$DEVICE" "$m" "$b" "$d" "$steps" "$input")
  timeout -k 15 -s TERM "$t" "${env_cmd[@]}" "$DPTRAIN" "$REPO/$cfg" --run-dir "$LOGDIR/runs" --name "$name" \
    --log-level warn --reset --set "${base[@]}" train.log_every="$every" "${trace[@]}" "${sets[@]}" >"$log" 2>&1 || rc=$?
  ((rc != 0)) && { echo "dptrain exit status $rc" >&2; tail -n 5 "$log" >&2; }
  local result  # read from the log (an "unknown key" error), then appended to it
  result=$("$PY" "$REPORT" dptrain "$LOGDIR/runs/$name" --model "$m" --batch "$b" --dtype "$d" --input "$input" \
    --rc "$rc" --variant "$variant" --log "$log" 2>&1)
  echo "$result" >>"$log"
  collect "$log" || failed=1
}

for case in $CASES; do
  IFS=: read -r m b d <<<"$case"
  if ! model_info "$m" >/dev/null || ! [[ $b =~ ^[1-9][0-9]*$ ]] || ! [[ $d =~ ^(bf16|fp16|fp32)$ ]]; then
    die "case '$case': MODEL:BATCH:DTYPE with MODEL $MODEL_NAMES and DTYPE bf16, fp16 or fp32"
  fi
done
for mode in $MODES; do
  [[ $mode == eager || $mode == compile ]] || die "MODES: eager and/or compile, not '$mode'"
done
[[ $E2E == 0 || $E2E == 1 ]] || die "E2E: 1 (the end-to-end runs too) or 0, not '$E2E'"
# variant_runs_on MODEL MODELS: whether a variant for MODELS ("*": VARIANT_MODELS; else
# "m1+m2", the models named after its label's '@') runs on MODEL's cases.
variant_runs_on() {
  if [[ $2 == "*" ]]; then [[ " $VARIANT_MODELS " == *" $1 "* ]]; else [[ "+$2+" == *"+$1+"* ]]; fi
}
# VARIANTS, checked once: one "label models key=v key=v" line each.
variant_lines=$("$PY" "$REPORT" variants -- "$VARIANTS") || die "VARIANTS '$VARIANTS' is malformed (see above)"
bad=$(unknown_variant_model "$variant_lines") ||
  die "VARIANTS: variant '${bad% *}' names the model '${bad#* }', which is not one of $MODEL_NAMES"
say "cases: $CASES; torch modes: $MODES; device $DEVICE; variants: ${VARIANTS:-none}; logs in $LOGDIR; $((DEADLINE - $(date +%s))) s left"
# Every case's eager and judged dptrain numbers first, then the end-to-end ones, then the compiles
# (slow to build: ~1-2 min each for a ResNet), so that a short budget loses the torch.compile
# columns, not the comparison.
for case in $CASES; do
  IFS=: read -r m b d <<<"$case"
  [[ " $MODES " == *" eager "* ]] && torch_mode "$m" "$b" "$d" eager $((2 * TORCH_SECONDS + 60))
  dptrain_run "$m" "$b" "$d" resident
  if [[ -n $variant_lines ]]; then
    while read -r label models sets; do
      variant_runs_on "$m" "$models" || continue
      # shellcheck disable=SC2086  # sets: key=value words without spaces (bench_report.py variants)
      dptrain_run "$m" "$b" "$d" resident "$label" $sets
    done <<<"$variant_lines"
  fi
done
if [[ $E2E == 1 ]]; then
  for case in $CASES; do
    IFS=: read -r m b d <<<"$case"
    dptrain_run "$m" "$b" "$d" loader
  done
fi
if [[ " $MODES " == *" compile "* ]]; then
  for case in $CASES; do
    IFS=: read -r m b d <<<"$case"
    torch_mode "$m" "$b" "$d" compile $((2 * TORCH_SECONDS + 200))
  done
fi

echo
"$PY" "$REPORT" table "$RESULTS" --variants "$VARIANTS" | tee "$LOGDIR/table.txt"
exit $failed
