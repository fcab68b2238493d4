#!/usr/bin/env bash
# Integration test (issue 33): models/gpt_tiny.cfg trained on the CPU in bf16 (train.precision =
# "bf16": the linear products on oneDNN's bf16 x bf16 -> f32 matmul, the rest and the weights f32)
# reaches a validation loss within $MAX_GAP of the f32 run's, on the same byte-level shards of
# /usr/share/common-licenses/GPL-3 as test_gpt_tiny.sh; the f32 run itself learns (below
# $MAX_F32_LOSS; the training bytes' unigram model scores 3.51). Short: $STEPS steps at batch 16,
# dropout 0, one evaluation at the end, about 30 s on the 2-core development machine.
# A CPU without AVX-512-BF16 or AMX is refused (tests/launch/test_cpu_bf16.cpp): the test skips (exit 77).
# Usage: bash tests/integration/test_gpt_tiny_bf16.sh BUILD_DIR (from the repo root, as ctest runs it).
set -uo pipefail

build=${1:?usage: test_gpt_tiny_bf16.sh BUILD_DIR}
STEPS=60
MAX_GAP=0.05
MAX_F32_LOSS=3.2
t_start=$SECONDS

fail() { echo "FAIL: $*" >&2; exit 1; }
# shellcheck source=tests/integration/gpt_tiny_env.sh
. "$(dirname "${BASH_SOURCE[0]}")/gpt_tiny_env.sh"
gpt_tiny_setup "$build" dptrain-gpt-tiny-bf16

# train NAME [FLAGS...]: $STEPS steps at batch 16, dropout 0, one evaluation at the end, no final checkpoint.
train() {
  local name=$1
  shift
  train_gpt_tiny 300 "$name" --set train.steps=$STEPS --set train.batch_size=16 --set train.warmup_steps=10 \
    --set train.eval_every=$STEPS --set model.dropout=0 --set checkpoint.final=false "$@"
}

make_gpl3_shards
if ! train bf16 --set train.precision=bf16; then
  if grep -q 'train.precision = "bf16" on the CPU needs AVX-512-BF16 or AMX' "$work/bf16.out"; then
    echo "skip: this CPU (as oneDNN sees it) has neither AVX-512-BF16 nor AMX"
    exit 77  # ctest's SKIP_RETURN_CODE (tests/CMakeLists.txt): skipped, not passed
  fi
  fail "the bf16 run failed"
fi
grep -q 'linear GEMMs: bf16 x bf16 -> f32' "$work/bf16.out" || fail "the bf16 run's CPU-kernels line does not say bf16"
train f32 || fail "the f32 run failed"
b=$(eval_loss "$work/runs/bf16")
f=$(eval_loss "$work/runs/f32")
[ -n "$b" ] && [ -n "$f" ] || fail "no eval line in metrics.jsonl (bf16 '$b', f32 '$f')"
awk -v f="$f" -v m="$MAX_F32_LOSS" 'BEGIN { exit !(f <= m) }' || fail "the f32 run's validation loss $f > $MAX_F32_LOSS"
awk -v a="$b" -v f="$f" -v g="$MAX_GAP" 'BEGIN { d = a - f; if (d < 0) d = -d; exit !(d <= g) }' ||
  fail "bf16's validation loss $b is not within $MAX_GAP of f32's $f after $STEPS steps"
awk -v a="$b" -v f="$f" 'BEGIN { exit !(a != f) }' || fail "bf16's loss equals f32's ($f): did bf16 run?"
echo "ok   validation loss after $STEPS steps: bf16 $b, f32 $f (within $MAX_GAP)"
echo "total $((SECONDS - t_start)) s"
