#!/usr/bin/env bash
# Integration test of the GPU-machine scripts, on a machine without a GPU: their pure parts.
#   1. tools/gpu/run_all.sh --dry-run prints its plan (every step, its time box, the commands),
#      runs and writes nothing; bad arguments are usage errors (exit 2).
#   2. tools/bench/bench_report.py: a fixed sample of RESULT lines gives the expected table, byte
#      for byte; a fixed metrics.jsonl gives the expected dptrain RESULT line (ok, partial, missing).
#   3. tools/gpu/pack.sh refuses a folder that is not a build (exit 2).
#   4. tools/bench/torch_train_bench.py --smoke (tiny CPU runs) with the oracle venv's python,
#      if it exists ($DPTRAIN_VENV, default /opt/dptrain-venv); else SKIP.
#   5. tools/bench/gpu_vs_torch.sh with SMOKE=1 (dptrain and torch on the CPU, fmnist_cnn, a few
#      steps) when BUILD_DIR/dptrain and the venv exist; else SKIP.
#   5b. The bundle pack.sh makes by default (every test binary, libdnnl, the data), packed with xz -0
#      (an upper bound of the real -6 bundle), travels within the device tool's 64 MiB.
#   6. A rehearsal of the whole flow when BUILD_DIR is a CUDA build with test_kernels: pack.sh into
#      a scratch carry folder, then run_all.sh with stand-in nvidia-smi and compute-sanitizer, the
#      fmnist step on the CPU (a slice, 1 epoch) and the benchmark in SMOKE mode (if the venv
#      exists): every step OK, exit 0, the summary and the log archive in $OUT; else SKIP.
# Usage: bash tests/integration/test_gpu_scripts.sh [BUILD_DIR]   (from the repo root, as ctest runs it)
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-$repo/build}
venv_py=${DPTRAIN_VENV:-/opt/dptrain-venv}/bin/python
tmp=$(mktemp -d /tmp/test-gpu-scripts.XXXXXX)
carry=.gpu-carry-test.$$  # inside the repo (pack.sh wants a git-ignored folder there)
trap 'rm -rf "$tmp" "${repo:?}/$carry"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
cd "$repo" || exit 1

# --- 1. run_all.sh --dry-run ------------------------------------------------------------------
out=$tmp/never-made
plan=$(OUT=$out WORK=$tmp/work-never-made CARRY=$tmp/no-carry bash tools/gpu/run_all.sh --dry-run --cpu-top1 0.912 2>&1)
rc=$?
if ((rc != 0)); then fail "run_all.sh --dry-run exit $rc: $plan"; fi
for want in "run_all plan (dry run" "setup [box" "info [box" "gtest [box 120s]" \
  "--gtest_filter='*Cuda*:*DeviceChoice*:*Nccl*:*LossScaler*'" "compute-sanitizer --tool memcheck" \
  "fmnist [box 120s]" "train.device=cuda" "vs CPU 0.912 (given) within 0.005" "tools/bench/gpu_vs_torch.sh" \
  "resnet50:256:bf16 cifar_resnet18:128:bf16 fmnist_cnn:128:bf16"; do
  [[ $plan == *"$want"* ]] || fail "run_all.sh --dry-run does not say '$want'; it printed:
$plan"
done
[[ -e $out || -e $tmp/work-never-made ]] && fail "run_all.sh --dry-run created \$OUT or \$WORK"
plan=$(CARRY=$tmp/no-carry bash tools/gpu/run_all.sh --dry-run --only fmnist,bench 2>&1)
[[ $plan == *"gtest: not selected"* && $plan == *"bench [box"* && $plan == *"MISSING: run tools/gpu/pack.sh"* &&
  $plan == *"final top-1 reported alone: no CPU reference"* ]] || fail "--only fmnist,bench without a carry: $plan"
bash tools/gpu/run_all.sh --dry-run --only nonsense >/dev/null 2>&1
rc=$?
((rc == 2)) || fail "run_all.sh --only nonsense: exit $rc, want 2"
bash tools/gpu/run_all.sh --dry-run --frobnicate >/dev/null 2>&1
rc=$?
((rc == 2)) || fail "run_all.sh --frobnicate: exit $rc, want 2"
pass "run_all.sh --dry-run"

# --- 2. bench_report.py -------------------------------------------------------------------------
cat >"$tmp/results.txt" <<'EOF'
[gpu_vs_torch 01:02:03] a log line that is not a result
RESULT tool=torch model=resnet50 batch=256 dtype=bf16 mode=eager img_s=2874.6 step_ms=89.056 peak_bytes=21474836480 reserved_bytes=23622320128 compile_s=- device=cuda status=ok note=- spread=0.004 steps=5x18
RESULT tool=dptrain model=resnet50 batch=256 dtype=bf16 mode=- img_s=3105.2 step_ms=82.400 peak_bytes=17179869184 reserved_bytes=18253611008 compile_s=- device=- status=ok note=- steps=169 windows=13
RESULT tool=torch model=resnet50 batch=256 dtype=bf16 mode=compile img_s=3311.0 step_ms=77.318 peak_bytes=19327352832 reserved_bytes=20401094656 compile_s=71.4 device=cuda status=ok note=- spread=0.002 steps=5x21
RESULT tool=torch model=cifar_resnet18 batch=128 dtype=fp16 mode=eager img_s=21890.4 step_ms=5.847 peak_bytes=1288490189 reserved_bytes=1610612736 compile_s=- device=cuda status=ok note=- spread=0.011 steps=5x273
RESULT tool=dptrain model=cifar_resnet18 batch=128 dtype=fp16 mode=- img_s=15002.7 step_ms=8.532 peak_bytes=- reserved_bytes=- compile_s=- device=- status=partial note=time_box_hit_at_step_900 steps=900 windows=14
RESULT tool=torch model=cifar_resnet18 batch=128 dtype=fp16 mode=compile img_s=- step_ms=- peak_bytes=- reserved_bytes=- compile_s=- device=cuda status=oom note=OutOfMemoryError:CUDA_out_of_memory
RESULT tool=torch model=fmnist_cnn batch=128 dtype=fp32 mode=eager img_s=98000.0 step_ms=1.306 peak_bytes=52428800 reserved_bytes=67108864 compile_s=- device=cuda status=ok note=- spread=0.020 steps=5x200
RESULT tool=dptrain model=fmnist_cnn batch=128 dtype=fp32 mode=- img_s=- step_ms=- peak_bytes=- reserved_bytes=- compile_s=- device=- status=error note=no_train_lines_exit_status_1
RESULT tool=torch model=fmnist_cnn batch=128 dtype=fp32 mode=compile img_s=- step_ms=- peak_bytes=- status=skipped note=no_time_left
EOF
cat >"$tmp/table.expected" <<'EOF'
model           batch  dtype  dptrain img/s  eager img/s  ratio  compile img/s  ratio  dptrain MiB  torch MiB
resnet50          256  bf16            3105         2875  1.08x           3311  0.94x        16384      20480
cifar_resnet18    128  fp16          15003*        21890  0.69x            oom    n/a          n/a       1229
fmnist_cnn        128  fp32           error        98000    n/a        skipped    n/a          n/a         50
ratio: dptrain img/s / torch img/s, same model, batch and dtype (torch: AMP + channels_last for bf16/fp16, data resident on the GPU)
MiB: peak allocated (dptrain: the pool's used-high; torch: eager max_memory_allocated); *: partial (a time box ended the run)
target (resnet50 bf16 batch 256): dptrain 3105 img/s = 1.08x eager 2875 img/s: MET (need dptrain >= 1.0x torch eager AMP channels_last, aim >= 1.2x and >= 3000 img/s: aim not reached)
EOF
python3 tools/bench/bench_report.py table "$tmp/results.txt" >"$tmp/table.got" 2>&1 || fail "bench_report.py table exit $?"
if cmp -s "$tmp/table.expected" "$tmp/table.got"; then pass "bench_report.py table, byte for byte"; else
  fail "bench_report.py table differs from the expected table:"
  diff "$tmp/table.expected" "$tmp/table.got" >&2
fi
echo "RESULT tool=torch model=fmnist_cnn batch=8 dtype=fp32 mode=eager img_s=10 status=ok" >"$tmp/no-target.txt"
python3 tools/bench/bench_report.py table "$tmp/no-target.txt" | grep -cx >/dev/null \
  'target (resnet50 bf16): not measured in this run (need dptrain >= 1.0x torch eager AMP channels_last, aim >= 1.2x and >= 3000 img/s)' ||
  fail "bench_report.py table without a resnet50 bf16 row: no 'not measured' target line"
: >"$tmp/empty.txt"
python3 tools/bench/bench_report.py table "$tmp/empty.txt" >/dev/null 2>&1 && fail "bench_report.py table of an empty file exits 0"

mkdir -p "$tmp/run"
python3 - "$tmp/run/metrics.jsonl" <<'EOF'
import json, sys
with open(sys.argv[1], "w") as f:
    for i, s in enumerate([500, 900, 1000, 1010, 990, 1005, 1020, 980, 1000, 1015]):
        st = (i + 1) * 10
        f.write(json.dumps({"split": "train", "step": st, "epoch": 1, "loss": 2.3, "samples_per_s": s,
                            "step_time_s": 256 / s, "time": st * 0.25}) + "\n")
    f.write('{"split":"eval","step":100,"epoch":1,"loss":2.3,"top1":0.1,"top5":0.5,"samples":256,"time":26}\n')
    f.write('{"split":"device","peak_device_memory_bytes":1610612736,"reserved_high_bytes":2147483648}\n')
EOF
want='RESULT tool=dptrain model=resnet50 batch=256 dtype=bf16 mode=- img_s=1002.5 step_ms=255.363 peak_bytes=1610612736 reserved_bytes=2147483648 compile_s=- device=- status=ok note=- steps=100 windows=8'
got=$(python3 tools/bench/bench_report.py dptrain "$tmp/run" --model resnet50 --batch 256 --dtype bf16 --rc 0)
[[ $got == "$want" ]] || fail "bench_report.py dptrain:
 got  $got
 want $want"
got=$(python3 tools/bench/bench_report.py dptrain "$tmp/run" --model resnet50 --batch 256 --dtype bf16 --rc 124)
[[ $got == *" status=partial note=time_box_hit_at_step_100 "* ]] || fail "bench_report.py dptrain --rc 124: $got"
got=$(python3 tools/bench/bench_report.py dptrain "$tmp/nothing" --model resnet50 --batch 256 --dtype bf16 --rc 1)
rc=$?
[[ $rc == 1 && $got == *" status=error note=no_metrics:No_such_file_or_directory" ]] || fail "bench_report.py dptrain without a run: exit $rc, $got"
pass "bench_report.py dptrain"

# --- 3. pack.sh ---------------------------------------------------------------------------------
bash tools/gpu/pack.sh "$tmp" >/dev/null 2>&1
rc=$?
((rc == 2)) || fail "pack.sh on a folder that is not a build: exit $rc, want 2"
pass "pack.sh refuses a non-build"

# --- 4. torch_train_bench.py --smoke ------------------------------------------------------------
if [[ -x $venv_py ]]; then
  for spec in fmnist_cnn:fp16 cifar_resnet18:bf16; do
    m=${spec%%:*} d=${spec##*:}
    log=$tmp/torch-$m.log
    if ! timeout 600 "$venv_py" tools/bench/torch_train_bench.py --smoke --model "$m" --dtype "$d" --modes eager >"$log" 2>&1; then
      fail "torch_train_bench.py --smoke --model $m --dtype $d:"; tail -n 20 "$log" >&2
    elif ! grep -q "^RESULT tool=torch model=$m batch=2 dtype=$d mode=eager img_s=[0-9.]* .* device=cpu status=ok " "$log"; then
      fail "torch_train_bench.py --smoke --model $m: no ok RESULT line:"; cat "$log" >&2
    else
      pass "torch_train_bench.py --smoke $m $d"
    fi
  done
else
  echo "SKIP: torch_train_bench.py smoke: no $venv_py (tools/setup.sh makes it)"
fi

# --- 5. gpu_vs_torch.sh, CPU smoke --------------------------------------------------------------
if [[ -x $venv_py && -x $build/dptrain ]]; then
  log=$tmp/gpu_vs_torch.log
  if SMOKE=1 PY=$venv_py LOGDIR=$tmp/bench DEADLINE=$(($(date +%s) + 600)) \
    bash tools/bench/gpu_vs_torch.sh "$build" >"$log" 2>&1; then
    if grep -Eq '^fmnist_cnn +8 +fp32 +[0-9]+ +[0-9]+ +[0-9.]+x +n/a +n/a +n/a +n/a$' "$log"; then
      pass "gpu_vs_torch.sh SMOKE=1"
    else
      fail "gpu_vs_torch.sh SMOKE=1: no fmnist_cnn row with both numbers:"; cat "$log" >&2
    fi
  else
    fail "gpu_vs_torch.sh SMOKE=1 failed:"; tail -n 30 "$log" >&2
  fi
else
  echo "SKIP: gpu_vs_torch.sh smoke: needs $build/dptrain and $venv_py"
fi

# --- 5b. the real bundle fits the device tool's carry limit --------------------------------------
# What tools/gpu/pack.sh carries by default (every test binary, diffckpt, libdnnl's 39 MB among the
# libraries, Fashion-MNIST), packed with xz -0: a weaker compression than pack.sh's default -6, so
# its total bounds the real bundle's from above; pack.sh itself fails above LIMIT_MIB (64).
default_tests=(test_runtime test_kernels test_models test_collectives test_launch)
all_built=1
for t in "${default_tests[@]}"; do [[ -x $build/tests/$t ]] || all_built=0; done
if ((all_built)) && [[ -x $build/dptrain && -x $build/diffckpt ]] && ldd "$build/dptrain" 2>/dev/null | grep -q libcudart; then
  data=/usr/share/datasets/fashion-mnist
  [[ -f $data/train-images-idx3-ubyte.gz ]] || data=none
  size_carry=$carry-size
  trap 'rm -rf "$tmp" "${repo:?}/$carry" "${repo:?}/$size_carry"' EXIT
  if ! CARRY_DIR=$size_carry XZ_OPT="-0 -T2" CPU_RUN=none FMNIST_DIR=$data bash tools/gpu/pack.sh "$build" >"$tmp/pack-size.log" 2>&1; then
    fail "pack.sh with everything it carries by default (xz -0) is over the limit or failed:"; tail -n 30 "$tmp/pack-size.log" >&2
  else
    total=$(sed -n 's/^\[pack\] total that travels: \([0-9.]*\) MiB of 64 MiB$/\1/p' "$tmp/pack-size.log")
    if [[ -z $total ]] || ! awk -v t="$total" 'BEGIN { exit !(t <= 64) }'; then
      fail "pack.sh's total '$total' MiB (xz -0) is not within 64 MiB:"; cat "$tmp/pack-size.log" >&2
    elif ldd "$build/dptrain" | grep -q libdnnl && ! grep -q '^file=lib/libdnnl.so' "$repo/$size_carry/MANIFEST.txt"; then
      fail "dptrain links libdnnl but pack.sh did not carry it:"; cat "$repo/$size_carry/MANIFEST.txt" >&2
    else
      pass "the default bundle (libdnnl included, data $([[ $data == none ]] && echo "left out" || echo carried)) travels $total MiB of 64 with xz -0"
    fi
  fi
  rm -rf "${repo:?}/$size_carry"
else
  echo "SKIP: bundle size: $build is not a CUDA build with dptrain, diffckpt and every default test binary"
fi

# --- 6. pack.sh + run_all.sh rehearsal ---------------------------------------------------------
if [[ -x $build/dptrain && -x $build/tests/test_kernels ]] && ldd "$build/dptrain" 2>/dev/null | grep -c libcudart >/dev/null; then
  data=/usr/share/datasets/fashion-mnist
  [[ -f $data/train-images-idx3-ubyte.gz ]] || data=none
  if ! CARRY_DIR=$carry TESTS=test_kernels XZ_OPT=-0 CPU_RUN=none FMNIST_DIR=$data \
    bash tools/gpu/pack.sh "$build" >"$tmp/pack.log" 2>&1; then
    fail "pack.sh:"; tail -n 20 "$tmp/pack.log" >&2
  else
    mkdir -p "$tmp/fake"
    # shellcheck disable=SC2016  # the stand-ins' own code, written as it is
    printf '%s\n' '#!/bin/bash' 'if [[ "$*" == *query-gpu* ]]; then echo "Stand-in GPU, 0.0, 1 MiB"; else echo stand-in; fi' \
      >"$tmp/fake/nvidia-smi"
    # shellcheck disable=SC2016
    printf '%s\n' '#!/bin/bash' \
      'while [[ $1 == --* ]]; do case $1 in --version) echo stand-in; exit 0 ;; --tool | --error-exitcode | --print-limit) shift 2 ;; *) shift ;; esac; done' \
      '"$@"; rc=$?; echo "========= ERROR SUMMARY: 0 errors"; exit $rc' >"$tmp/fake/compute-sanitizer"
    chmod +x "$tmp/fake/nvidia-smi" "$tmp/fake/compute-sanitizer"
    bench=(--skip bench)
    [[ -x $venv_py ]] && bench=()
    rc=0
    PATH=$tmp/fake:$PATH OUT=$tmp/out WORK=$tmp/work CARRY=$repo/$carry FMNIST_DEVICE=cpu FMNIST_EPOCHS=1 \
      FMNIST_SETS="data.train_limit=1000 data.eval_limit=500 train.warmup_steps=2" FMNIST_TOL=1 SMOKE=1 \
      BENCH_PY=$venv_py bash tools/gpu/run_all.sh --budget 400 --cpu-top1 0.5 "${bench[@]}" >"$tmp/run_all.log" 2>&1 || rc=$?
    want=(setup info gtest sanitizer fmnist)
    ((${#bench[@]})) || want+=(bench)
    bad=0
    for s in "${want[@]}"; do
      ok=OK
      [[ $s == fmnist && $data == none ]] && ok=SKIP
      grep -Eq "^$s +$ok " "$tmp/out/summary.txt" 2>/dev/null || { bad=1; fail "run_all.sh rehearsal: step $s is not $ok"; }
    done
    tar -tzf "$tmp/out/logs.tar.gz" 2>/dev/null | grep -cx 'logs/gtest-test_kernels.log' >/dev/null || { bad=1; fail "run_all.sh rehearsal: no gtest log in \$OUT/logs.tar.gz"; }
    ((rc == 0)) || { bad=1; fail "run_all.sh rehearsal: exit $rc"; }
    if ((bad)); then cat "$tmp/run_all.log" >&2; else pass "pack.sh + run_all.sh rehearsal (stand-in GPU tools${bench[*]:+, no bench})"; fi
  fi
else
  echo "SKIP: pack.sh + run_all.sh rehearsal: $build is not a CUDA build with dptrain and tests/test_kernels"
fi

if ((failures)); then echo "test_gpu_scripts: $failures failure(s)" >&2; exit 1; fi
echo "test_gpu_scripts: all passed"
