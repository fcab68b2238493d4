# models.sh: the benchmark models of tools/bench/gpu_vs_torch.sh and tools/gpu/run_all.sh (sourced).
# defines:
#   model_info MODEL -> "CFG C H W CLASSES GUESS_IMG_S": the cfg, the per-sample input shape and
#     classes of its synthetic data, and a guess of torch eager's img/s on one H100/H200 that sizes
#     a dptrain run when torch gave nothing; fails for an unknown MODEL
#   synthetic_sets DEVICE MODEL BATCH DTYPE STEPS [INPUT] -> the --set overrides (one per line) of
#     a benchmark run: the model's cfg on synthetic data of its shape, no augmentation, no
#     evaluation during training, no checkpoints, no TensorBoard, STEPS steps of BATCH in DTYPE;
#     INPUT "resident" (default: the batches made on the GPU, data.synthetic_device = "cuda", as
#     PyTorch's benchmark keeps its inputs on the GPU) or "loader" (dptrain's CPU loader and input
#     pipeline: end to end); fp32 with train.tf32 = "conv", PyTorch's default TF32 policy
#     gpt2 (GPT-2 124M, models/gpt2.cfg): INPUT "resident" gives it synthetic token windows made
#     on the GPU (data.dataset = "synthetic", data.synthetic_device = "cuda": uniform random
#     tokens, STEPS x BATCH windows of 1024 + 1); INPUT "loader" the token shard at $BENCH_TOKENS
#     (llm.c's format, at least STEPS x BATCH windows of 1025 tokens: make_token_shard writes one)
#     through dptrain's token loader and input pipeline; fails when BENCH_TOKENS is unset there
#   make_token_shard PATH TOKENS [PY]: writes PATH, an llm.c token shard of TOKENS random GPT-2
#     token ids (fixed seed)
#   unknown_variant_model LINES -> "LABEL MODEL" of the first model a variant names after '@'
#     (LINES: bench_report.py variants' output) that model_info does not know, and status 1;
#     nothing and 0 when every one is known
#   MODEL_NAMES: the models, for messages
# shellcheck shell=bash
model_info() {
  case $1 in
    resnet50) echo "models/resnet50.cfg 3 224 224 1000 3000" ;;
    cifar_resnet18) echo "models/cifar_resnet18.cfg 3 32 32 10 20000" ;;
    fmnist_cnn) echo "models/fmnist_cnn.cfg 1 28 28 10 50000" ;;
    gpt2) echo "models/gpt2.cfg 1 1 1024 50257 250" ;;
    *) return 1 ;;
  esac
}
# shellcheck disable=SC2034  # for the scripts that source this file
MODEL_NAMES="resnet50, cifar_resnet18, fmnist_cnn or gpt2"

unknown_variant_model() {
  local label models m
  while read -r label models _; do
    [[ -z $label || $models == "*" ]] && continue
    for m in ${models//+/ }; do
      model_info "$m" >/dev/null || { echo "$label $m"; return 1; }
    done
  done <<<"$1"
  return 0
}

synthetic_sets() {
  local device=$1 m=$2 b=$3 d=$4 steps=$5 input=${6:-resident} info c h w k
  info=$(model_info "$m") || return 1
  read -r _ c h w k _ <<<"$info"
  case $input in
    resident) input=cuda ;;
    loader) input=cpu ;;
    *) return 1 ;;
  esac
  if [[ $m == gpt2 ]]; then
    local token_data=(data.dataset=synthetic data.synthetic_device=cuda data.synthetic_train=$((steps * b))
      data.synthetic_eval=1)
    if [[ $input == cpu ]]; then
      [[ -n ${BENCH_TOKENS:-} ]] || return 1
      token_data=(data.dataset=tokens data.path="$BENCH_TOKENS" data.val_path="$BENCH_TOKENS" data.eval_limit=1)
    fi
    printf '%s\n' train.device="$device" train.precision="$d" train.batch_size="$b" train.steps="$steps" \
      train.eval_every=0 train.warmup_steps=0 run.tensorboard=false run.progress_every_s=0 checkpoint.final=false \
      checkpoint.every_steps=0 "${token_data[@]}"
    return 0
  fi
  printf '%s\n' train.device="$device" train.precision="$d" train.batch_size="$b" train.steps="$steps" \
    train.epochs=1 train.eval_every=0 train.warmup_steps=0 run.tensorboard=false run.progress_every_s=0 \
    checkpoint.final=false checkpoint.every_steps=0 data.dataset=synthetic "data.synthetic_shape=[$c,$h,$w]" \
    data.synthetic_classes="$k" data.synthetic_train=$((steps * b)) data.synthetic_eval="$b" \
    data.crop_padding=0 data.hflip=false data.shuffle=false data.synthetic_device="$input"
  [[ $d == fp32 ]] && echo train.tf32=conv
  return 0
}

make_token_shard() {
  local path=$1 n=$2 py=${3:-python3}
  "$py" - "$path" "$n" <<'PYEOF'
import array, random, sys
path, n = sys.argv[1], int(sys.argv[2])
header = array.array("i", [0] * 256)
header[0], header[1], header[2] = 20240520, 1, n
rng = random.Random(0)
tokens = array.array("H", (rng.randrange(50257) for _ in range(n)))
with open(path, "wb") as f:
    header.tofile(f)
    tokens.tofile(f)
PYEOF
}
