#!/usr/bin/env bash
# run_all.sh: all of dptrain's GPU-side work in one call on the lent GPU machine, from the
# repository root, with what tools/gpu/pack.sh put into .gpu-carry/ (built here, carried there).
#
#   bash tools/gpu/run_all.sh [--cpu-top1 X] [--budget S] [--only STEPS] [--skip STEPS] [--dry-run]
#
# Steps, in this order (the most informative first, so that a run cut short has them; names
# comma-separated for --only/--skip; setup and info always run):
#   setup      unpack .gpu-carry/bundle.tar.xz into $WORK; LD_LIBRARY_PATH for dptrain and the
#              tests = the carried libraries + the lib folders of python3's nvidia-* packages
#              (cuDNN, cuBLAS, NCCL, the CUDA runtime), + the carried libstdc++ only if needed;
#              links the build's compiled-in source and build paths to this checkout and $WORK
#   info       nvidia-smi, nvcc, compute-sanitizer, torch/cuDNN/NCCL versions, the pack manifest
#   gtest      every carried test binary with the GPU tests' filter (GTEST_FILTER, else the line
#              of tools/gpu/gtest_filter.txt, else '*Gpu.*:*Gpu/*.*') and DPTRAIN_FASHION_MNIST_DIR
#              = the carried Fashion-MNIST; counts per binary, every failed and skipped test with
#              its reason (a skip for "no GPU" on this GPU host is flagged as a bug)
#   fmnist     models/fmnist_cnn.cfg on the GPU (carried Fashion-MNIST) in each of
#              FMNIST_PRECISIONS (fp32 bf16 fp16); final top-1 against the CPU reference
#              (--cpu-top1, CPU_TOP1, else .gpu-carry/cpu_top1 from pack.sh): fp32 within
#              FMNIST_TOL (0.005), bf16 and fp16 within FMNIST_TOL16 (0.01)
#   profile    PROFILE_CASE (resnet50:256:bf16) on synthetic data with profile.layers over
#              PROFILE_WINDOW (5) steps after PROFILE_WARMUP (5): the PROFILE_TOP (15) layers
#              with the most time, from the run's layers.json (tools/gpu/layers_table.py)
#   bench      tools/bench/gpu_vs_torch.sh: dptrain with its batches made on the GPU (the judged
#              figure, as torch's resident inputs) vs PyTorch eager and torch.compile, dptrain
#              end to end (its CPU loader) beside it, and each of VARIANTS (dptrain with other
#              cfg settings, on VARIANT_MODELS' cases or those its label names after '@') as one
#              more row
#   sanitizer  compute-sanitizer --tool memcheck over $SANITIZE_BINS with $SANITIZE_FILTER
#   kernels    Nsight Compute (ncu) over step KERNELS_STEP (3) of the profile step's run (its
#              profile.steps capture range): gpu__time_duration.sum of every kernel, no cache or
#              clock control; the KERNELS_TOP (20) kernels with the most total time
#              (tools/gpu/ncu_top.py)
# Each step has a share of --budget (default 560 s; the device tool allows 600 a command; the
# table is in docs/gpu-runbook.md); its time box is its share plus what the steps before it left
# unused, never what the later selected steps' shares need; a step whose box is under its least
# worth starting is skipped and says so. A failed step does not stop the later ones. The summary
# (steps, the gtest report, the layer table, the benchmark table, the kernel table) is printed last
# and written to $OUT/summary.txt; every log (and each run's metrics.jsonl, layers.json, the
# kernels CSV) goes into $OUT/logs.tar.gz, both refreshed after each step so that a cut-off call
# still returns what ran.
#
# Environment: OUT (default /tmp/dptrain-gpu-out), WORK (default /tmp/dptrain-gpu), CARRY
# (default .gpu-carry), CPU_TOP1, GTEST_FILTER, SANITIZE_BINS (test_kernels), SANITIZE_FILTER (the
# gtest filter), FMNIST_PRECISIONS, FMNIST_TOL, FMNIST_TOL16, FMNIST_EPOCHS (the cfg's 3),
# FMNIST_DEVICE (cuda; cpu to try the step without a GPU), FMNIST_SETS (more key=value overrides,
# space-separated), PROFILE_CASE, PROFILE_WARMUP, PROFILE_WINDOW, PROFILE_TOP, PROFILE_DEVICE
# (cuda; also the kernels step's), KERNELS_STEP, KERNELS_TOP, NCU (default: ncu on PATH, else
# /usr/local/cuda/bin/ncu); for the benchmark VARIANTS ("label:key=v,key=v;label2@gpt2:key=v"),
# VARIANT_MODELS, CASES, MODES, DPTRAIN_SECONDS, TORCH_SECONDS, E2E, SMOKE (see
# tools/bench/gpu_vs_torch.sh) and BENCH_PY (its python, default python3).
# Exit status: 0 when no step failed (skipped steps are listed, not failures), 1 when one failed
# or ran out of its time box, 2 on a usage error.
# The step functions are called as "step_$name", which shellcheck cannot see:
# shellcheck disable=SC2317
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$REPO" || exit 2
# shellcheck source=tools/bench/models.sh
source "$REPO/tools/bench/models.sh"  # model_info, synthetic_sets
ALL_STEPS=(gtest fmnist profile bench sanitizer kernels)
BUDGET=560
DRY=0
ONLY=""
SKIP=""
CPU_TOP1=${CPU_TOP1:-}
usage() { sed -n '2,54p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
while (($#)); do
  case $1 in
    --dry-run) DRY=1 ;;
    --budget) BUDGET=${2:?--budget needs seconds}; shift ;;
    --cpu-top1) CPU_TOP1=${2:?--cpu-top1 needs a number}; shift ;;
    --only) ONLY=${2:?--only needs step names}; shift ;;
    --skip) SKIP=${2:?--skip needs step names}; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "run_all: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
usage_error() { echo "run_all: $*" >&2; exit 2; }
[[ $BUDGET =~ ^[0-9]+$ ]] || usage_error "--budget '$BUDGET' is not a number of seconds"
for s in ${ONLY//,/ } ${SKIP//,/ }; do
  [[ " ${ALL_STEPS[*]} " == *" $s "* ]] || usage_error "unknown step '$s' (steps: ${ALL_STEPS[*]}; setup and info always run)"
done

OUT=${OUT:-/tmp/dptrain-gpu-out}
WORK=${WORK:-/tmp/dptrain-gpu}
CARRY=${CARRY:-$REPO/.gpu-carry}
[[ $CARRY == /* ]] || CARRY=$REPO/$CARRY
# The GPU tests' filter: every GPU test's suite name ends in "Gpu" (tests/README, issue 20 §2);
# tools/gpu/gtest_filter.txt holds the rule's filter where it exists.
FILTER_FILE=$REPO/tools/gpu/gtest_filter.txt
if [[ -n ${GTEST_FILTER:-} ]]; then FILTER_FROM="GTEST_FILTER"
elif [[ -s $FILTER_FILE ]]; then
  GTEST_FILTER=$(sed -n '/^[[:space:]]*[^#[:space:]]/{s/^[[:space:]]*//;s/[[:space:]]*$//;p;q}' "$FILTER_FILE")
  FILTER_FROM="tools/gpu/gtest_filter.txt"
fi
if [[ -z ${GTEST_FILTER:-} ]]; then GTEST_FILTER='*Gpu.*:*Gpu/*.*'; FILTER_FROM="the default: no tools/gpu/gtest_filter.txt"; fi
SANITIZE_BINS=${SANITIZE_BINS:-test_kernels}
SANITIZE_FILTER=${SANITIZE_FILTER:-$GTEST_FILTER}
CPU_TOP1_FROM="given"
if [[ -z $CPU_TOP1 && -s $CARRY/cpu_top1 ]]; then CPU_TOP1=$(head -c 32 "$CARRY/cpu_top1" | tr -d ' \n'); CPU_TOP1_FROM="packed"; fi
[[ -z $CPU_TOP1 || $CPU_TOP1 =~ ^(0|1)?\.?[0-9]+$ ]] || usage_error "CPU top-1 '$CPU_TOP1' ($CPU_TOP1_FROM) is not a fraction like 0.912"
FMNIST_PRECISIONS=${FMNIST_PRECISIONS:-fp32 bf16 fp16}
FMNIST_TOL=${FMNIST_TOL:-0.005}
FMNIST_TOL16=${FMNIST_TOL16:-0.01}
FMNIST_EPOCHS=${FMNIST_EPOCHS:-}
FMNIST_DEVICE=${FMNIST_DEVICE:-cuda}
FMNIST_SETS=${FMNIST_SETS:-}
for p in $FMNIST_PRECISIONS; do [[ $p =~ ^(fp32|bf16|fp16)$ ]] || usage_error "FMNIST_PRECISIONS: '$p' is not fp32, bf16 or fp16"; done
PROFILE_CASE=${PROFILE_CASE:-resnet50:256:bf16}
PROFILE_WARMUP=${PROFILE_WARMUP:-5}
PROFILE_WINDOW=${PROFILE_WINDOW:-5}
PROFILE_TOP=${PROFILE_TOP:-15}
PROFILE_DEVICE=${PROFILE_DEVICE:-cuda}
KERNELS_STEP=${KERNELS_STEP:-3}
KERNELS_TOP=${KERNELS_TOP:-20}
IFS=: read -r P_MODEL P_BATCH P_DTYPE <<<"$PROFILE_CASE"
if ! model_info "$P_MODEL" >/dev/null || ! [[ $P_BATCH =~ ^[1-9][0-9]*$ && $P_DTYPE =~ ^(fp32|bf16|fp16)$ ]]; then
  usage_error "PROFILE_CASE '$PROFILE_CASE': MODEL:BATCH:DTYPE with MODEL $MODEL_NAMES and DTYPE fp32, bf16 or fp16"
fi
for v in PROFILE_WARMUP PROFILE_WINDOW PROFILE_TOP KERNELS_STEP KERNELS_TOP; do
  [[ ${!v} =~ ^[0-9]+$ ]] || usage_error "$v '${!v}' is not a whole number"
done
((PROFILE_WINDOW >= 1 && PROFILE_TOP >= 1 && KERNELS_STEP >= 1 && KERNELS_TOP >= 1)) ||
  usage_error "PROFILE_WINDOW, PROFILE_TOP, KERNELS_STEP and KERNELS_TOP must be at least 1"
VARIANTS=${VARIANTS:-}
VARIANT_LINES=$(python3 "$REPO/tools/bench/bench_report.py" variants -- "$VARIANTS") || usage_error "VARIANTS is malformed (above)"
bad=$(unknown_variant_model "$VARIANT_LINES") ||
  usage_error "VARIANTS: variant '${bad% *}' names the model '${bad#* }', which is not one of $MODEL_NAMES"
LOGS=$WORK/logs
BUILD=$WORK/build
T0=$(date +%s)
DEADLINE=$((T0 + BUDGET))
RESERVE=15  # seconds kept for the summary and the last log archive
# Each step's share of the budget (with RESERVE they add up to the default 560 s; the table in
# docs/gpu-runbook.md) and the least time worth starting it with, which it gets while that much
# is left even beyond its share: setup and info, which everything needs, take 2-5 s on the GPU
# host but may take up to 30 and 20 s before the later steps go without.
declare -A SHARE=([setup]=10 [info]=10 [gtest]=130 [fmnist]=45 [profile]=60 [bench]=190 [sanitizer]=40 [kernels]=60)
declare -A MIN=([setup]=30 [info]=20 [gtest]=20 [fmnist]=20 [profile]=30 [bench]=60 [sanitizer]=20 [kernels]=45)

enabled() {
  local s=$1
  [[ $s == setup || $s == info ]] && return 0
  [[ -n $ONLY && ",$ONLY," != *",$s,"* ]] && return 1
  [[ ",$SKIP," == *",$s,"* ]] && return 1
  return 0
}
# later_shares NAME: the shares of the selected steps after NAME.
later_shares() {
  local s after=0 sum=0
  for s in setup info "${ALL_STEPS[@]}"; do
    ((after)) && enabled "$s" && sum=$((sum + SHARE[$s]))
    [[ $s == "$1" ]] && after=1
  done
  echo "$sum"
}
fmnist_data() {  # the folder of the four Fashion-MNIST .gz files (carried, else the machine's), or nothing
  local d
  for d in "$CARRY/fashion-mnist" /usr/share/datasets/fashion-mnist; do
    if [[ -f $d/train-images-idx3-ubyte.gz && -f $d/t10k-labels-idx1-ubyte.gz ]]; then echo "$d"; return; fi
  done
}
tol_of() { [[ $1 == fp32 ]] && echo "$FMNIST_TOL" || echo "$FMNIST_TOL16"; }

# ---------------------------------------------------------------------------------------------
# --dry-run: the plan, nothing run, nothing written.
if ((DRY)); then
  echo "run_all plan (dry run: nothing is run or written)"
  echo "  repo $REPO; carried $CARRY ($([[ -f $CARRY/bundle.tar.xz ]] && echo present || echo 'MISSING: run tools/gpu/pack.sh here first'))"
  echo "  budget ${BUDGET}s (ends by +$((BUDGET - RESERVE))s, ${RESERVE}s kept for the summary); results to \$OUT=$OUT; work in $WORK"
  echo "  a step's box = its share + what earlier steps left unused, less the later selected steps' shares"
  echo "  setup [share ${SHARE[setup]}s]: tar -xJf $CARRY/bundle.tar.xz -C $WORK"
  echo "         LD_LIBRARY_PATH (dptrain and tests only) = $WORK/lib + python3's nvidia/*/lib folders (+ $WORK/lib-fallback if ldd needs it)"
  echo "  info [share ${SHARE[info]}s]: nvidia-smi; nvcc --version; compute-sanitizer --version; python3 torch/cuDNN/NCCL versions; ldd $BUILD/dptrain"
  data=$(fmnist_data)
  for s in "${ALL_STEPS[@]}"; do
    if ! enabled "$s"; then echo "  $s: not selected"; continue; fi
    case $s in
      gtest) echo "  gtest [share ${SHARE[gtest]}s]: DPTRAIN_FASHION_MNIST_DIR=${data:-(none carried)} $BUILD/tests/test_* --gtest_filter='$GTEST_FILTER' ($FILTER_FROM) --gtest_output=json:$LOGS/gtest/<binary>.json" ;;
      fmnist)
        echo "  fmnist [share ${SHARE[fmnist]}s]: for each of $FMNIST_PRECISIONS: $BUILD/dptrain models/fmnist_cnn.cfg --set train.device=$FMNIST_DEVICE train.precision=<p> data.path=${data:-(none: the step is skipped)}${FMNIST_EPOCHS:+ train.epochs=$FMNIST_EPOCHS}${FMNIST_SETS:+ $FMNIST_SETS}"
        if [[ -n $CPU_TOP1 ]]; then
          echo -n "         final top-1 vs CPU $CPU_TOP1 ($CPU_TOP1_FROM):"
          for p in $FMNIST_PRECISIONS; do echo -n " $p within $(tol_of "$p")"; done
          echo
        else echo "         final top-1 reported alone: no CPU reference (--cpu-top1, or pack.sh's CPU_RUN)"; fi ;;
      profile) echo "  profile [share ${SHARE[profile]}s]: $BUILD/dptrain ${P_MODEL} batch $P_BATCH $P_DTYPE on synthetic data, $PROFILE_DEVICE, $((PROFILE_WARMUP + PROFILE_WINDOW)) steps, profile.layers=$((PROFILE_WARMUP + 1))-$((PROFILE_WARMUP + PROFILE_WINDOW)); the top $PROFILE_TOP layers of its layers.json" ;;
      bench) echo "  bench [share ${SHARE[bench]}s]: DEADLINE=<end> LOGDIR=$LOGS/bench tools/bench/gpu_vs_torch.sh $BUILD"
        echo "         cases: ${CASES:-resnet50:256:bf16 cifar_resnet18:128:bf16 fmnist_cnn:128:bf16}; torch modes: ${MODES:-eager compile}"
        echo "         dptrain: batches made on the GPU (judged)$([[ ${E2E:-1} == 1 ]] && echo ", then end to end (CPU loader)" || echo "; end to end: not run (E2E=0)")"
        if [[ -n $VARIANT_LINES ]]; then
          while read -r label models sets; do
            [[ $models == "*" ]] && models="${VARIANT_MODELS:-resnet50}"
            echo "         variant $label (dptrain only, on ${models//+/ }): --set $sets"
          done <<<"$VARIANT_LINES"
        else echo "         variants: none (VARIANTS)"; fi ;;
      sanitizer) echo "  sanitizer [share ${SHARE[sanitizer]}s]: compute-sanitizer --tool memcheck --error-exitcode 99 $BUILD/tests/{${SANITIZE_BINS// /,}} --gtest_filter='$SANITIZE_FILTER'" ;;
      kernels) echo "  kernels [share ${SHARE[kernels]}s]: ${NCU:-ncu} --target-processes all --profile-from-start off --metrics gpu__time_duration.sum --cache-control none --clock-control none -o $LOGS/kernels/report $BUILD/dptrain <the profile run, $KERNELS_STEP steps> profile.steps=$KERNELS_STEP-$KERNELS_STEP"
        echo "         then ncu --import $LOGS/kernels/report.ncu-rep --csv --page details > kernels.csv; the top $KERNELS_TOP kernels by total time" ;;
    esac
  done
  echo "  then: the summary and its tables to stdout and \$OUT/summary.txt; logs in \$OUT/logs.tar.gz"
  exit 0
fi

# ---------------------------------------------------------------------------------------------
rm -rf "${LOGS:?}"  # a fresh log folder: nothing stale from an earlier call on a warm machine
mkdir -p "$OUT" "$LOGS" || usage_error "cannot create $OUT or $LOGS"
declare -A STATUS NOTE SECS
ORDER=()
DP_LD=""
DP_ENV=(env)
FMNIST_DATA=$(fmnist_data)
say() { echo "[run_all +$(($(date +%s) - T0))s] $*"; }

# left: seconds left before the reserve.
left() { echo $((DEADLINE - RESERVE - $(date +%s))); }
# step_box NAME: this step's time box (its share plus the slack before it, less the later steps'
# shares; at least its MIN while that much is left), or 0 when it no longer fits.
step_box() {
  local l b
  l=$(left)
  b=$((l - $(later_shares "$1")))
  ((b < MIN[$1])) && b=$((MIN[$1] < l ? MIN[$1] : l))
  ((b < MIN[$1])) && b=0
  echo "$b"
}
# until_ts END: seconds from now until the epoch second END (0 when past).
until_ts() { local d=$(($1 - $(date +%s))); echo $((d > 0 ? d : 0)); }
record() {  # record NAME STATUS SECONDS NOTE
  ORDER+=("$1")
  STATUS[$1]=$2 SECS[$1]=$3 NOTE[$1]=$4
  say "$1: $2 (${3}s) $4"
}
snapshot() {  # the logs so far into $OUT/logs.tar.gz (no checkpoints, weights or ncu reports)
  tar -C "$WORK" --exclude='*.safetensors' --exclude='checkpoints' --exclude='*.tfevents.*' --exclude='*.ncu-rep' \
    -czf "$OUT/logs.tar.gz.tmp" logs 2>/dev/null && mv "$OUT/logs.tar.gz.tmp" "$OUT/logs.tar.gz"
  summary >"$OUT/summary.txt"
}
# run_boxed SECONDS LOG CMD...: CMD under a time box, output to LOG; returns CMD's status (124: box hit).
run_boxed() {
  local t=$1 log=$2
  shift 2
  timeout -k 10 "$t" "$@" >>"$log" 2>&1
}
# dp_env CMD...: CMD with the dptrain libraries (a function: for direct calls; under timeout use "${DP_ENV[@]}").
dp_env() { "${DP_ENV[@]}" "$@"; }
set_dp_ld() { DP_LD=$1; DP_ENV=(env LD_LIBRARY_PATH="$DP_LD" OMP_WAIT_POLICY=passive); }
# section TITLE FILE: a titled part of the summary when FILE has something.
section() {
  [[ -s $2 ]] || return 0
  echo
  echo "== $1"
  cat "$2"
}

summary() {
  echo "== dptrain GPU run $(date -u '+%Y-%m-%d %H:%M:%S') UTC, $(($(date +%s) - T0)) s of ${BUDGET}; ${GPU_NAME:-GPU not read}; ${COMMIT:-}"
  printf '%-10s %-8s %5s  %s\n' step status secs note
  local s
  for s in "${ORDER[@]}"; do printf '%-10s %-8s %5s  %s\n' "$s" "${STATUS[$s]}" "${SECS[$s]}" "${NOTE[$s]}"; done
  section "gtest: filter '$GTEST_FILTER' ($FILTER_FROM)" "$LOGS/gtest/report.txt"
  section "profile: $P_MODEL batch $P_BATCH $P_DTYPE (layers.json in logs/runs/profile)" "$LOGS/profile/table.txt"
  section "bench" "$LOGS/bench/table.txt"
  section "kernels: step $KERNELS_STEP of the profile run under Nsight Compute (kernels.csv in logs/kernels)" "$LOGS/kernels/table.txt"
}

# ---------------------------------------------------------------------------------------------
step_setup() {
  local log=$LOGS/setup.log t0=$SECONDS t
  t=$(step_box setup)
  if [[ ! -f $CARRY/bundle.tar.xz ]]; then
    record setup FAIL 0 "no $CARRY/bundle.tar.xz: run tools/gpu/pack.sh where you build, and carry .gpu-carry"
    return 1
  fi
  rm -rf "${BUILD:?}" "${WORK:?}/lib" "${WORK:?}/lib-fallback"
  if ! run_boxed "$t" "$log" tar -xJf "$CARRY/bundle.tar.xz" -C "$WORK"; then
    echo "tar -xJ failed; trying python3's tarfile" >>"$log"
    run_boxed "$t" "$log" python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
      "$CARRY/bundle.tar.xz" "$WORK" || { record setup FAIL $((SECONDS - t0)) "cannot unpack the bundle (see setup.log)"; return 1; }
  fi
  local nv
  nv=$(python3 - 2>>"$log" <<'EOF'
import os
dirs = []
try:
    import nvidia
    for base in list(nvidia.__path__):
        for root, ds, fs in os.walk(base):
            if os.path.basename(root) == "lib" and any(".so" in f for f in fs):
                dirs.append(root)
            if root[len(base):].count(os.sep) >= 2:
                ds[:] = []
except Exception as e:
    print(f"no nvidia packages: {e}", file=__import__("sys").stderr)
print(":".join(sorted(set(dirs))))
EOF
  )
  echo "nvidia lib folders: ${nv:-none}" >>"$log"
  set_dp_ld "$WORK/lib${nv:+:$nv}"
  local missing
  missing=$(dp_env ldd "$BUILD/dptrain" 2>&1 | grep -E 'not found' || true)
  if [[ -n $missing ]] && [[ -d $WORK/lib-fallback ]]; then
    echo "with the device's libraries: $missing; adding the carried libstdc++/libgcc_s" >>"$log"
    set_dp_ld "$DP_LD:$WORK/lib-fallback"
    missing=$(dp_env ldd "$BUILD/dptrain" 2>&1 | grep -E 'not found' || true)
  fi
  echo "LD_LIBRARY_PATH for dptrain and tests: $DP_LD" >>"$log"
  echo "Fashion-MNIST: ${FMNIST_DATA:-not carried and not on this machine}" >>"$log"
  # The tests have the build's absolute source and build folders compiled in: point them here.
  local src bin
  src=$(sed -n 's/^source_dir=//p' "$BUILD/MANIFEST" 2>/dev/null)
  bin=$(sed -n 's/^build_dir=//p' "$BUILD/MANIFEST" 2>/dev/null)
  if [[ -n $src && ! -e $src ]]; then
    mkdir -p "$(dirname "$src")" && ln -s "$REPO" "$src" && echo "linked $src -> $REPO" >>"$log"
  fi
  if [[ -n $bin && ! -e $bin ]]; then
    mkdir -p "$(dirname "$bin")" && ln -s "$BUILD" "$bin" && echo "linked $bin -> $BUILD" >>"$log"
  fi
  if [[ -n $missing ]]; then
    echo "$missing" >>"$log"
    record setup FAIL $((SECONDS - t0)) "libraries not found: $(awk '{print $1}' <<<"$missing" | sort -u | tr '\n' ' ')"
    return 1
  fi
  record setup OK $((SECONDS - t0)) "$(grep -c . "$BUILD/MANIFEST" 2>/dev/null || echo 0) manifest lines; libs: $WORK/lib + ${nv:-no nvidia packages}"
}

step_info() {
  local log=$LOGS/info.log t0=$SECONDS t
  t=$(step_box info)
  { echo "== nvidia-smi"; timeout 20 nvidia-smi; } 2>&1 | tee -a "$log"
  {
    echo "== nvcc"; timeout 20 nvcc --version 2>&1 | tail -n 2
    echo "== compute-sanitizer"; timeout 20 compute-sanitizer --version 2>&1 | tail -n 1
    echo "== ncu"; timeout 20 "${NCU:-ncu}" --version 2>&1 | tail -n 1
    echo "== uname / os"; uname -a; grep PRETTY_NAME /etc/os-release
    echo "== python3 nvidia packages"; python3 -m pip list 2>/dev/null | grep -iE '^(torch|torchvision|triton|nvidia-)'
    echo "== manifest"; cat "$BUILD/MANIFEST" 2>/dev/null
    echo "== ldd dptrain"; dp_env ldd "$BUILD/dptrain"
  } >>"$log" 2>&1
  GPU_NAME=$(timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1)
  COMMIT=$(sed -n 's/^commit=/commit /p' "$BUILD/MANIFEST" 2>/dev/null)
  local tv
  tv=$(timeout "$t" python3 - 2>>"$log" <<'EOF'
import torch

def attempt(f):
    try:
        return f()
    except Exception as e:  # a CPU-only torch has no NCCL; report, do not fail
        return f"({type(e).__name__})"

nccl = attempt(torch.cuda.nccl.version)
if isinstance(nccl, tuple):
    nccl = ".".join(map(str, nccl))
print(f"torch {torch.__version__} CUDA {torch.version.cuda} cuDNN {attempt(torch.backends.cudnn.version)} "
      f"NCCL {nccl} GPUs {attempt(torch.cuda.device_count)}")
EOF
  )
  tv=${tv:-torch not importable (see info.log)}
  local built
  built=$(sed -n 's/^built_against=//p' "$BUILD/MANIFEST" 2>/dev/null)
  [[ -n $built ]] && tv+="; dptrain built against $built"
  echo "== torch: $tv" >>"$log"
  if [[ -z $GPU_NAME ]]; then
    record info FAIL $((SECONDS - t0)) "nvidia-smi shows no GPU; $tv"
    return 1
  fi
  record info OK $((SECONDS - t0)) "$GPU_NAME; $tv"
}

step_gtest() {
  local t0=$SECONDS dir=$LOGS/gtest specs=() b end failed=0
  end=$(($(date +%s) + $(step_box gtest)))
  mkdir -p "$dir"
  local env_cmd=("${DP_ENV[@]}")
  [[ -n $FMNIST_DATA ]] && env_cmd+=(DPTRAIN_FASHION_MNIST_DIR="$FMNIST_DATA")
  for b in "$BUILD"/tests/test_*; do
    [[ -x $b ]] || continue
    local name t rc=0
    name=$(basename "$b")
    t=$(until_ts "$end")
    if ((t < 10)); then echo "no time left: not run" >"$dir/$name.log"; specs+=("$name:124"); continue; fi
    rm -f "$dir/$name.json"
    run_boxed "$t" "$dir/$name.log" "${env_cmd[@]}" "$b" --gtest_filter="$GTEST_FILTER" --gtest_color=no \
      --gtest_output=json:"$dir/$name.json" || rc=$?
    specs+=("$name:$rc")
  done
  if ((${#specs[@]} == 0)); then record gtest FAIL 0 "no test binaries in $BUILD/tests"; return 1; fi
  local host=()
  [[ -n ${GPU_NAME:-} ]] && host=(--gpu-host)
  python3 "$REPO/tools/gpu/gtest_report.py" --dir "$dir" "${host[@]}" "${specs[@]}" >"$dir/report.txt" 2>&1 || failed=1
  local brief
  brief=$(python3 "$REPO/tools/gpu/gtest_report.py" --dir "$dir" "${host[@]}" --brief "${specs[@]}" 2>&1)
  record gtest "$( ((failed)) && echo FAIL || echo OK)" $((SECONDS - t0)) "$brief (report below)"
  return "$failed"
}

# fmnist_run PRECISION SECONDS: one Fashion-MNIST run; prints "STATUS note" (STATUS OK/FAIL/TIMEOUT).
fmnist_run() {
  local p=$1 t=$2 log=$LOGS/fmnist-$1.log rc=0 extra=()
  [[ -n $FMNIST_EPOCHS ]] && extra+=(train.epochs="$FMNIST_EPOCHS")
  # shellcheck disable=SC2206  # FMNIST_SETS: space-separated key=value overrides
  extra+=($FMNIST_SETS)
  run_boxed "$t" "$log" "${DP_ENV[@]}" "$BUILD/dptrain" models/fmnist_cnn.cfg --run-dir "$LOGS/runs" --name "fmnist-$p" --reset \
    --set train.device="$FMNIST_DEVICE" train.precision="$p" data.path="$FMNIST_DATA" run.progress_every_s=0 \
    run.tensorboard=false "${extra[@]}" || rc=$?
  local got top1 sps peak
  got=$(python3 - "$LOGS/runs/fmnist-$p/metrics.jsonl" 2>>"$log" <<'EOF'
import json, sys
top1 = sps = peak = None
try:
    lines = open(sys.argv[1]).readlines()
except OSError:
    lines = []
for line in lines:
    try:
        d = json.loads(line)
    except ValueError:
        continue
    if d.get("split") == "eval" and "top1" in d:
        top1 = d["top1"]
    elif d.get("split") == "train" and "samples_per_s" in d:
        sps = d["samples_per_s"]
    elif d.get("split") == "device":
        peak = d.get("peak_device_memory_bytes")
print(f"{top1 if top1 is not None else '-'} {sps if sps is not None else '-'} {peak if peak is not None else '-'}")
EOF
  )
  read -r top1 sps peak <<<"${got:-- - -}"
  local n="$p top1 $top1"
  [[ $sps != - ]] && n+=" ($(printf '%.0f' "$sps") samples/s"
  [[ $peak != - ]] && n+=", peak $(awk -v p="$peak" 'BEGIN { printf "%.0f", p / 1048576 }') MiB"
  [[ $sps != - ]] && n+=")"
  if ((rc == 124 || rc == 137)); then echo "TIMEOUT $n: time box ${t}s hit"; return; fi
  if ((rc != 0)) || [[ $top1 == - ]]; then
    echo "FAIL $n: dptrain exit $rc: $(grep -m1 -E 'error|Error' "$log" | cut -c1-200)"
    return
  fi
  [[ -z $CPU_TOP1 ]] && { echo "OK $n"; return; }
  local tol
  tol=$(tol_of "$p")
  if awk -v g="$top1" -v c="$CPU_TOP1" -v tol="$tol" 'BEGIN { d = g - c; if (d < 0) d = -d; exit !(d <= tol) }'; then
    echo "OK $n, within $tol"
  else
    echo "FAIL $n: differs from the CPU's by more than $tol"
  fi
}

step_fmnist() {
  local t0=$SECONDS end p notes=() status=OK
  if [[ -z $FMNIST_DATA ]]; then
    record fmnist SKIP 0 "Fashion-MNIST was not carried (pack.sh without FMNIST_DIR) and is not on this machine: GPU top-1 NOT checked"
    return 0
  fi
  end=$(($(date +%s) + $(step_box fmnist)))
  for p in $FMNIST_PRECISIONS; do
    local t r
    t=$(until_ts "$end")
    if ((t < 10)); then notes+=("$p: no time left"); status=FAIL; continue; fi
    r=$(fmnist_run "$p" "$t")
    notes+=("${r#* }")
    case ${r%% *} in
      OK) ;;
      TIMEOUT) [[ $status == OK ]] && status=TIMEOUT ;;
      *) status=FAIL ;;
    esac
  done
  local ref="no CPU reference (--cpu-top1, or pack.sh's CPU_RUN): not compared"
  [[ -n $CPU_TOP1 ]] && ref="CPU top-1 $CPU_TOP1 ($CPU_TOP1_FROM)"
  local IFS=';'
  record fmnist "$status" $((SECONDS - t0)) "$FMNIST_DEVICE, $ref; ${notes[*]}"
  [[ $status == OK ]]
}

# synthetic_run NAME SECONDS LOG STEPS PREFIX_CMD... -- KEY=V...: dptrain on PROFILE_CASE's
# synthetic data (as the benchmark runs it) under PREFIX_CMD (e.g. ncu), run dir $LOGS/runs/NAME.
synthetic_run() {
  local name=$1 t=$2 log=$3 steps=$4 prefix=() cfg base
  shift 4
  while (($#)) && [[ $1 != -- ]]; do prefix+=("$1"); shift; done
  shift
  read -r cfg _ <<<"$(model_info "$P_MODEL")"
  mapfile -t base < <(synthetic_sets "$PROFILE_DEVICE" "$P_MODEL" "$P_BATCH" "$P_DTYPE" "$steps")
  run_boxed "$t" "$log" "${prefix[@]}" "${DP_ENV[@]}" "$BUILD/dptrain" "$REPO/$cfg" --run-dir "$LOGS/runs" --name "$name" \
    --reset --set "${base[@]}" train.log_every=1 "$@"
}
# unknown_key_note LOG KEY: a note when LOG has dptrain's "unknown key 'KEY'" error.
unknown_key_note() {
  grep -q "unknown key '$2'" "$1" 2>/dev/null &&
    echo "this dptrain build rejects $2 (unknown key): it predates the key; build one that has it"
}

step_profile() {
  local t0=$SECONDS t rc=0 log=$LOGS/profile.log steps=$((PROFILE_WARMUP + PROFILE_WINDOW))
  local window=$((PROFILE_WARMUP + 1))-$steps run=$LOGS/runs/profile
  t=$(step_box profile)
  mkdir -p "$LOGS/profile"
  synthetic_run profile "$t" "$log" "$steps" -- profile.layers="$window" || rc=$?
  local what="$P_MODEL batch $P_BATCH $P_DTYPE, $PROFILE_DEVICE, steps $window of $steps"
  if ((rc == 124 || rc == 137)); then record profile TIMEOUT $((SECONDS - t0)) "$what: time box ${t}s hit"; return 1; fi
  local unknown
  unknown=$(unknown_key_note "$log" profile.layers)
  if [[ -n $unknown ]]; then record profile FAIL $((SECONDS - t0)) "$what: $unknown"; return 1; fi
  if ((rc != 0)) || [[ ! -s $run/layers.json ]]; then
    tail -n 5 "$log" | sed 's/^/    /'
    record profile FAIL $((SECONDS - t0)) "$what: dptrain exit $rc$([[ -s $run/layers.json ]] || echo ", no $run/layers.json")"
    return 1
  fi
  if ! python3 "$REPO/tools/gpu/layers_table.py" "$run/layers.json" --top "$PROFILE_TOP" >"$LOGS/profile/table.txt" 2>>"$log"; then
    record profile FAIL $((SECONDS - t0)) "$what: layers.json unreadable: $(tail -n 1 "$log")"
    return 1
  fi
  local got
  got=$(head -n 1 "$LOGS/profile/table.txt" | sed -n 's/.*: \([0-9.]* ms a step\); [0-9]* of \([0-9]*\) layers.*/\1, \2 layers/p')
  record profile OK $((SECONDS - t0)) "$what: ${got:-see the table} (table below)"
}

step_bench() {
  local t0=$SECONDS t rc=0
  t=$(step_box bench)
  mkdir -p "$LOGS/bench"
  DEADLINE=$(($(date +%s) + t)) LOGDIR=$LOGS/bench PY=${BENCH_PY:-python3} DPTRAIN_LD_LIBRARY_PATH=$DP_LD VARIANTS=$VARIANTS \
    timeout -k 10 $((t + 20)) bash "$REPO/tools/bench/gpu_vs_torch.sh" "$BUILD" >"$LOGS/bench.log" 2>&1 || rc=$?
  local note="table below; logs in bench/"
  local rejected
  rejected=$(sed -n 's/^RESULT .* variant=\([^ ]*\) .* status=unknown_key note=\([^ ]*\).*/\1 (\2)/p' "$LOGS/bench/results.txt" 2>/dev/null | sort -u | tr '\n' ' ')
  [[ -n $rejected ]] && note+="; variants this dptrain build cannot run (unknown key): ${rejected% }"
  case $rc in
    0) record bench OK $((SECONDS - t0)) "$note" ;;
    124 | 137) record bench TIMEOUT $((SECONDS - t0)) "$note"; return 1 ;;
    *) record bench FAIL $((SECONDS - t0)) "exit $rc (a measurement failed, was partial or skipped): $note"
       return 1 ;;
  esac
}

step_sanitizer() {
  local t0=$SECONDS failed=0 notes=() name cs end
  end=$(($(date +%s) + $(step_box sanitizer)))
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  [[ -x $cs ]] || { record sanitizer FAIL 0 "no compute-sanitizer"; return 1; }
  for name in $SANITIZE_BINS; do
    local b=$BUILD/tests/$name log=$LOGS/sanitizer-$name.log t rc=0
    [[ -x $b ]] || { notes+=("$name: not carried"); failed=1; continue; }
    t=$(until_ts "$end")
    if ((t < 10)); then notes+=("$name: no time left"); failed=1; continue; fi
    run_boxed "$t" "$log" "${DP_ENV[@]}" "$cs" --tool memcheck --error-exitcode 99 --print-limit 20 "$b" \
      --gtest_filter="$SANITIZE_FILTER" --gtest_color=no || rc=$?
    local summ
    summ=$(grep -m1 'ERROR SUMMARY' "$log" | sed 's/^========= //')
    case $rc in
      0) notes+=("$name: ${summ:-no summary}") ;;
      99) notes+=("$name: memcheck errors: ${summ:-see log}"); failed=1 ;;
      124 | 137) notes+=("$name: TIMEOUT after ${t}s"); failed=1 ;;
      *) notes+=("$name: exit $rc (tests failed under memcheck?) ${summ}"); failed=1 ;;
    esac
  done
  local IFS=';'
  record sanitizer "$( ((failed)) && echo FAIL || echo OK)" $((SECONDS - t0)) "${notes[*]}"
  return "$failed"
}

step_kernels() {
  local t0=$SECONDS t rc=0 ncu dir=$LOGS/kernels log=$LOGS/kernels/ncu.log
  t=$(step_box kernels)
  ncu=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
  [[ -x $ncu ]] || { record kernels FAIL 0 "no Nsight Compute ($ncu)"; return 1; }
  mkdir -p "$dir"
  local what="step $KERNELS_STEP of $P_MODEL batch $P_BATCH $P_DTYPE"
  # ncu profiles only between cudaProfilerStart and Stop (profile.steps), one pass per kernel
  # (one metric), without flushing caches or locking clocks: the kernels as the run sees them.
  # The dptrain environment goes after ncu's options (env ... dptrain), so that ncu itself keeps
  # its own libraries.
  local ncu_cmd=("$ncu" --target-processes all --profile-from-start off --metrics gpu__time_duration.sum
    --cache-control none --clock-control none -f -o "$dir/report")
  synthetic_run kernels "$t" "$log" "$KERNELS_STEP" "${ncu_cmd[@]}" -- profile.steps="$KERNELS_STEP-$KERNELS_STEP" || rc=$?
  if ((rc == 124 || rc == 137)); then record kernels TIMEOUT $((SECONDS - t0)) "$what: time box ${t}s hit (ncu.log)"; return 1; fi
  if ((rc != 0)) || [[ ! -s $dir/report.ncu-rep ]]; then
    tail -n 5 "$log" | sed 's/^/    /'
    record kernels FAIL $((SECONDS - t0)) "$what: ncu/dptrain exit $rc$([[ -s $dir/report.ncu-rep ]] || echo ", no report")"
    return 1
  fi
  if ! timeout 60 "$ncu" --import "$dir/report.ncu-rep" --csv --page details >"$dir/kernels.csv" 2>>"$log"; then
    record kernels FAIL $((SECONDS - t0)) "$what: ncu --import --csv failed (ncu.log)"
    return 1
  fi
  if ! python3 "$REPO/tools/gpu/ncu_top.py" "$dir/kernels.csv" --top "$KERNELS_TOP" >"$dir/table.txt" 2>>"$log"; then
    record kernels FAIL $((SECONDS - t0)) "$what: $(tail -n 1 "$log")"
    return 1
  fi
  record kernels OK $((SECONDS - t0)) "$what: $(head -n 1 "$dir/table.txt" | sed 's/ (Nsight.*//') (table below)"
}

# ---------------------------------------------------------------------------------------------
say "start: budget ${BUDGET}s, logs $LOGS, results $OUT"
step_setup
step_info
snapshot
for s in "${ALL_STEPS[@]}"; do
  enabled "$s" || continue
  b=$(step_box "$s")
  if ((b == 0)); then
    record "$s" SKIP 0 "no time left in the ${BUDGET}s budget (needs at least ${MIN[$s]}s)"
    continue
  fi
  say "$s (time box ${b}s)"
  "step_$s"
  snapshot
done

rc=0
for s in "${ORDER[@]}"; do [[ ${STATUS[$s]} == FAIL || ${STATUS[$s]} == TIMEOUT ]] && rc=1; done
echo
summary | tee "$OUT/summary.txt"
echo "exit status $rc (0: no step failed); full logs: \$OUT/logs.tar.gz"
snapshot
exit $rc
