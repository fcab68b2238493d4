#!/usr/bin/env bash
# run_all.sh: all of dptrain's GPU-side work in one call on the lent GPU machine, from the
# repository root, with what tools/gpu/pack.sh put into .gpu-carry/ (built here, carried there).
#
#   bash tools/gpu/run_all.sh [--cpu-top1 X] [--budget S] [--only STEPS] [--skip STEPS] [--dry-run]
#
# Steps (comma-separated names for --only/--skip; setup and info always run):
#   setup      unpack .gpu-carry/bundle.tar.xz into $WORK; LD_LIBRARY_PATH for dptrain and the
#              tests = the carried libraries + the lib folders of python3's nvidia-* packages
#              (cuDNN, cuBLAS, NCCL, the CUDA runtime), + the carried libstdc++ only if needed;
#              links the build's compiled-in source and build paths to this checkout and $WORK
#   info       nvidia-smi, nvcc, compute-sanitizer, torch/cuDNN/NCCL versions, the pack manifest
#   gtest      every carried test binary with --gtest_filter=$GTEST_FILTER
#   sanitizer  compute-sanitizer --tool memcheck over $SANITIZE_BINS with $SANITIZE_FILTER
#   fmnist     models/fmnist_cnn.cfg on the GPU (carried Fashion-MNIST); final top-1 against the
#              CPU reference (--cpu-top1, CPU_TOP1, else .gpu-carry/cpu_top1 from pack.sh): passes
#              within FMNIST_TOL (0.005)
#   bench      tools/bench/gpu_vs_torch.sh: dptrain vs PyTorch eager and torch.compile
# Each step has a time box, cut so that the whole ends within --budget seconds (default 560; the
# device tool allows 600 a command); a step that no longer fits is skipped and says so. A failed
# step does not stop the later ones. The summary (steps, then the benchmark table) is printed last
# and written to $OUT/summary.txt; every log (and each run's metrics.jsonl) goes into
# $OUT/logs.tar.gz, refreshed after each step so a cut-off call still returns what ran.
#
# Environment: OUT (default /tmp/dptrain-gpu-out), WORK (default /tmp/dptrain-gpu), CARRY
# (default .gpu-carry), CPU_TOP1, GTEST_FILTER ('*Cuda*:*DeviceChoice*:*Nccl*:*LossScaler*'),
# SANITIZE_BINS (test_kernels), SANITIZE_FILTER ('*Cuda*'), FMNIST_PRECISION (fp32), FMNIST_TOL
# (0.005), FMNIST_EPOCHS (the cfg's 3), FMNIST_DEVICE (cuda; cpu to try the step without a GPU),
# FMNIST_SETS (more key=value overrides, space-separated); for the benchmark CASES, MODES, DPTRAIN_SECONDS,
# TORCH_SECONDS, SMOKE (see tools/bench/gpu_vs_torch.sh) and BENCH_PY (its python, default python3).
# Exit status: 0 when no step failed (skipped steps are listed, not failures), 1 when one failed
# or ran out of its time box, 2 on a usage error.
# The step functions are called as "step_$name", which shellcheck cannot see:
# shellcheck disable=SC2317
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$REPO" || exit 2
ALL_STEPS=(gtest sanitizer fmnist bench)
BUDGET=560
DRY=0
ONLY=""
SKIP=""
CPU_TOP1=${CPU_TOP1:-}
usage() { sed -n '2,31p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
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
[[ $BUDGET =~ ^[0-9]+$ ]] || { echo "run_all: --budget '$BUDGET' is not a number of seconds" >&2; exit 2; }
for s in ${ONLY//,/ } ${SKIP//,/ }; do
  [[ " ${ALL_STEPS[*]} " == *" $s "* ]] || { echo "run_all: unknown step '$s' (steps: ${ALL_STEPS[*]})" >&2; exit 2; }
done

OUT=${OUT:-/tmp/dptrain-gpu-out}
WORK=${WORK:-/tmp/dptrain-gpu}
CARRY=${CARRY:-$REPO/.gpu-carry}
[[ $CARRY == /* ]] || CARRY=$REPO/$CARRY
GTEST_FILTER=${GTEST_FILTER:-*Cuda*:*DeviceChoice*:*Nccl*:*LossScaler*}
SANITIZE_BINS=${SANITIZE_BINS:-test_kernels}
SANITIZE_FILTER=${SANITIZE_FILTER:-*Cuda*}
CPU_TOP1_FROM="given"
if [[ -z $CPU_TOP1 && -s $CARRY/cpu_top1 ]]; then CPU_TOP1=$(head -c 32 "$CARRY/cpu_top1" | tr -d ' \n'); CPU_TOP1_FROM="packed"; fi
[[ -z $CPU_TOP1 || $CPU_TOP1 =~ ^(0|1)?\.?[0-9]+$ ]] || { echo "run_all: CPU top-1 '$CPU_TOP1' ($CPU_TOP1_FROM) is not a fraction like 0.912" >&2; exit 2; }
FMNIST_PRECISION=${FMNIST_PRECISION:-fp32}
FMNIST_TOL=${FMNIST_TOL:-0.005}
FMNIST_EPOCHS=${FMNIST_EPOCHS:-}
FMNIST_DEVICE=${FMNIST_DEVICE:-cuda}
FMNIST_SETS=${FMNIST_SETS:-}
LOGS=$WORK/logs
BUILD=$WORK/build
T0=$(date +%s)
DEADLINE=$((T0 + BUDGET))
RESERVE=15  # seconds kept for the summary and the last log archive
# Largest time box per step (cut to what is left of the budget) and the least worth starting.
declare -A BOX=([setup]=90 [info]=45 [gtest]=120 [sanitizer]=90 [fmnist]=120 [bench]=600)
declare -A MIN=([setup]=10 [info]=5 [gtest]=20 [sanitizer]=20 [fmnist]=30 [bench]=60)

enabled() {
  local s=$1
  [[ -n $ONLY && ",$ONLY," != *",$s,"* ]] && return 1
  [[ ",$SKIP," == *",$s,"* ]] && return 1
  return 0
}

# ---------------------------------------------------------------------------------------------
# --dry-run: the plan, nothing run, nothing written.
if ((DRY)); then
  echo "run_all plan (dry run: nothing is run or written)"
  echo "  repo $REPO; carried $CARRY ($([[ -f $CARRY/bundle.tar.xz ]] && echo present || echo 'MISSING: run tools/gpu/pack.sh here first'))"
  echo "  budget ${BUDGET}s (ends by +$((BUDGET - RESERVE))s, ${RESERVE}s kept for the summary); results to \$OUT=$OUT; work in $WORK"
  echo "  setup [box ${BOX[setup]}s]: tar -xJf $CARRY/bundle.tar.xz -C $WORK"
  echo "         LD_LIBRARY_PATH (dptrain and tests only) = $WORK/lib + python3's nvidia/*/lib folders (+ $WORK/lib-fallback if ldd needs it)"
  echo "  info [box ${BOX[info]}s]: nvidia-smi; nvcc --version; compute-sanitizer --version; python3 torch/cuDNN/NCCL versions; ldd $BUILD/dptrain"
  for s in "${ALL_STEPS[@]}"; do
    if ! enabled "$s"; then echo "  $s: not selected"; continue; fi
    case $s in
      gtest) echo "  gtest [box ${BOX[gtest]}s]: $BUILD/tests/test_* --gtest_filter='$GTEST_FILTER'" ;;
      sanitizer) echo "  sanitizer [box ${BOX[sanitizer]}s]: compute-sanitizer --tool memcheck --error-exitcode 99 $BUILD/tests/{${SANITIZE_BINS// /,}} --gtest_filter='$SANITIZE_FILTER'" ;;
      fmnist) echo "  fmnist [box ${BOX[fmnist]}s]: $BUILD/dptrain models/fmnist_cnn.cfg --set train.device=$FMNIST_DEVICE train.precision=$FMNIST_PRECISION data.path=$CARRY/fashion-mnist${FMNIST_EPOCHS:+ train.epochs=$FMNIST_EPOCHS}${FMNIST_SETS:+ $FMNIST_SETS}"
        if [[ -n $CPU_TOP1 ]]; then echo "         final top-1 vs CPU $CPU_TOP1 ($CPU_TOP1_FROM) within $FMNIST_TOL"
        else echo "         final top-1 reported alone: no CPU reference (--cpu-top1, or pack.sh's CPU_RUN)"; fi ;;
      bench) echo "  bench [box: the rest, up to ${BOX[bench]}s]: DEADLINE=<end> LOGDIR=$LOGS/bench tools/bench/gpu_vs_torch.sh $BUILD"
        echo "         cases: ${CASES:-resnet50:256:bf16 cifar_resnet18:128:bf16 fmnist_cnn:128:bf16}; torch modes: ${MODES:-eager compile}" ;;
    esac
  done
  echo "  then: the summary and the benchmark table to stdout and \$OUT/summary.txt; logs in \$OUT/logs.tar.gz"
  exit 0
fi

# ---------------------------------------------------------------------------------------------
rm -rf "${LOGS:?}"  # a fresh log folder: nothing stale from an earlier call on a warm machine
mkdir -p "$OUT" "$LOGS" || { echo "run_all: cannot create $OUT or $LOGS" >&2; exit 2; }
declare -A STATUS NOTE SECS
ORDER=()
DP_LD=""
DP_ENV=(env)
say() { echo "[run_all +$(($(date +%s) - T0))s] $*"; }

# left: seconds left before the reserve.
left() { echo $((DEADLINE - RESERVE - $(date +%s))); }
# step_box NAME: this step's time box, or 0 when it no longer fits.
step_box() {
  local l b
  l=$(left)
  b=$((BOX[$1] < l ? BOX[$1] : l))
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
snapshot() {  # the logs so far into $OUT/logs.tar.gz (no checkpoints or weights)
  tar -C "$WORK" --exclude='*.safetensors' --exclude='checkpoints' --exclude='*.tfevents.*' \
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

summary() {
  echo "== dptrain GPU run $(date -u '+%Y-%m-%d %H:%M:%S') UTC, $(($(date +%s) - T0)) s; ${GPU_NAME:-GPU not read}; ${COMMIT:-}"
  printf '%-10s %-8s %5s  %s\n' step status secs note
  local s
  for s in "${ORDER[@]}"; do printf '%-10s %-8s %5s  %s\n' "$s" "${STATUS[$s]}" "${SECS[$s]}" "${NOTE[$s]}"; done
  if [[ -s $LOGS/bench/table.txt ]]; then
    echo
    cat "$LOGS/bench/table.txt"
  fi
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
    echo "== nvcc"; nvcc --version 2>&1 | tail -n 2
    echo "== compute-sanitizer"; compute-sanitizer --version 2>&1 | tail -n 1
    echo "== uname / os"; uname -a; grep PRETTY_NAME /etc/os-release
    echo "== python3 nvidia packages"; python3 -m pip list 2>/dev/null | grep -iE '^(torch|torchvision|triton|nvidia-)' 
    echo "== manifest"; cat "$BUILD/MANIFEST" 2>/dev/null
    echo "== ldd dptrain"; dp_env ldd "$BUILD/dptrain"
  } >>"$log" 2>&1
  GPU_NAME=$(timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1)
  COMMIT=$(sed -n 's/^commit=/commit /p' "$BUILD/MANIFEST" 2>/dev/null)
  local tv
  tv=$(timeout "$t" python3 -c 'import torch; print(f"torch {torch.__version__} CUDA {torch.version.cuda} cuDNN {torch.backends.cudnn.version()} NCCL {\".\".join(map(str, torch.cuda.nccl.version()))} GPUs {torch.cuda.device_count()}")' 2>>"$log")
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
  local t0=$SECONDS t any=0 failed=0 notes=() b end
  end=$(($(date +%s) + $(step_box gtest)))
  for b in "$BUILD"/tests/test_*; do
    [[ -x $b ]] || continue
    any=1
    local name log
    name=$(basename "$b")
    log=$LOGS/gtest-$name.log
    t=$(until_ts "$end")
    if ((t < 10)); then notes+=("$name: no time left"); failed=1; continue; fi
    local rc=0
    run_boxed "$t" "$log" "${DP_ENV[@]}" "$b" --gtest_filter="$GTEST_FILTER" --gtest_color=no || rc=$?
    local pass fail skip
    pass=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n 1)
    fail=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n 1)
    skip=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$log" | tail -n 1)
    local n="$name ${pass:-0} passed"
    [[ -n $fail ]] && n+=" ${fail} FAILED"
    [[ -n $skip ]] && n+=" ${skip} skipped"
    if ((rc == 124 || rc == 137)); then n+=" TIMEOUT after ${t}s"; failed=1
    elif ((rc != 0)); then n+=" (exit $rc)"; failed=1; grep '^\[  FAILED  \] [A-Za-z]' "$log" | head -n 5 | sed 's/^/    /'; fi
    notes+=("$n")
  done
  if ((!any)); then record gtest FAIL 0 "no test binaries in $BUILD/tests"; return 1; fi
  local IFS=';'
  record gtest "$( ((failed)) && echo FAIL || echo OK)" $((SECONDS - t0)) "${notes[*]}"
  return "$failed"
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

step_fmnist() {
  local t0=$SECONDS t log=$LOGS/fmnist.log data=""
  local d
  for d in "$CARRY/fashion-mnist" /usr/share/datasets/fashion-mnist; do
    if [[ -f $d/train-images-idx3-ubyte.gz && -f $d/t10k-labels-idx1-ubyte.gz ]]; then data=$d; break; fi
  done
  if [[ -z $data ]]; then
    record fmnist SKIP 0 "Fashion-MNIST was not carried (pack.sh without FMNIST_DIR) and is not on this machine: GPU top-1 NOT checked"
    return 0
  fi
  t=$(step_box fmnist)
  local rc=0 extra=()
  [[ -n $FMNIST_EPOCHS ]] && extra+=(train.epochs="$FMNIST_EPOCHS")
  # shellcheck disable=SC2206  # FMNIST_SETS: space-separated key=value overrides
  extra+=($FMNIST_SETS)
  run_boxed "$t" "$log" "${DP_ENV[@]}" "$BUILD/dptrain" models/fmnist_cnn.cfg --run-dir "$LOGS/runs" --name fmnist-gpu --reset \
    --set train.device="$FMNIST_DEVICE" train.precision="$FMNIST_PRECISION" data.path="$data" run.progress_every_s=0 \
    run.tensorboard=false "${extra[@]}" || rc=$?
  local got
  got=$(python3 - "$LOGS/runs/fmnist-gpu/metrics.jsonl" 2>>"$log" <<'EOF'
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
  local top1 sps peak
  read -r top1 sps peak <<<"${got:-- - -}"
  local n="$FMNIST_DEVICE $FMNIST_PRECISION top1 $top1"
  [[ $sps != - ]] && n+=", last window $(printf '%.0f' "$sps") samples/s"
  [[ $peak != - ]] && n+=", peak $(awk -v p="$peak" 'BEGIN { printf "%.0f", p / 1048576 }') MiB"
  if ((rc == 124 || rc == 137)); then record fmnist TIMEOUT $((SECONDS - t0)) "$n (time box ${t}s)"; return 1; fi
  if ((rc != 0)) || [[ $top1 == - ]]; then
    tail -n 5 "$log" | sed 's/^/    /'
    record fmnist FAIL $((SECONDS - t0)) "$n (dptrain exit $rc)"
    return 1
  fi
  if [[ -z $CPU_TOP1 ]]; then
    record fmnist OK $((SECONDS - t0)) "$n; no CPU reference (--cpu-top1, or pack.sh's CPU_RUN): not compared"
    return 0
  fi
  if awk -v g="$top1" -v c="$CPU_TOP1" -v tol="$FMNIST_TOL" 'BEGIN { d = g - c; if (d < 0) d = -d; exit !(d <= tol) }'; then
    record fmnist OK $((SECONDS - t0)) "$n vs CPU $CPU_TOP1 ($CPU_TOP1_FROM; within $FMNIST_TOL)"
  else
    record fmnist FAIL $((SECONDS - t0)) "$n vs CPU $CPU_TOP1 ($CPU_TOP1_FROM): differs by more than $FMNIST_TOL"
    return 1
  fi
}

step_bench() {
  local t0=$SECONDS t rc=0
  t=$(step_box bench)
  mkdir -p "$LOGS/bench"
  DEADLINE=$(($(date +%s) + t)) LOGDIR=$LOGS/bench PY=${BENCH_PY:-python3} DPTRAIN_LD_LIBRARY_PATH=$DP_LD \
    timeout -k 10 $((t + 20)) bash "$REPO/tools/bench/gpu_vs_torch.sh" "$BUILD" >"$LOGS/bench.log" 2>&1 || rc=$?
  local note="table below; logs in bench/"
  case $rc in
    0) record bench OK $((SECONDS - t0)) "$note" ;;
    124 | 137) record bench TIMEOUT $((SECONDS - t0)) "$note"; return 1 ;;
    *) record bench FAIL $((SECONDS - t0)) "exit $rc (a measurement failed, was partial or skipped): $note"
       return 1 ;;
  esac
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
