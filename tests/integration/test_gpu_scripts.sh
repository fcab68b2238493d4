#!/usr/bin/env bash
# Integration test of the GPU-machine scripts, on a machine without a GPU: their pure parts.
#   1. tools/gpu/run_all.sh --dry-run prints its plan (every step in its order, its share of the
#      budget, the commands), runs and writes nothing; the shares and the reserve add up to the
#      default budget and match docs/gpu-runbook.md's table; bad arguments and a malformed
#      VARIANTS are usage errors (exit 2).
#   2. tools/bench/bench_report.py: a fixed sample of RESULT lines (variants, judged and end-to-end
#      dptrain lines, the target's speed and memory cases among them) gives the
#      expected table, byte for byte; a fixed metrics.jsonl gives the expected dptrain RESULT line
#      (ok, partial, missing, a variant's unknown key); VARIANTS strings parse or are refused.
#   2b. The pure scripts of run_all.sh against fixed samples in tests/integration/gpu_scripts/,
#      byte for byte: layers_table.py (a layers.json), ncu_top.py (an Nsight Compute CSV) and
#      gtest_report.py (GoogleTest JSON + console logs: passed, failed, skipped with reasons, a
#      crashed binary, a "no GPU" skip flagged on a GPU host); and their errors.
#   2c. tools/bench/models.sh's synthetic_sets for gpt2: synthetic token windows made on the GPU
#      (INPUT resident, no token shard), the token shard at BENCH_TOKENS for INPUT loader (refused
#      without it); the resident sets pass dptrain --check when BUILD_DIR/dptrain exists.
#   3. tools/gpu/pack.sh refuses a folder that is not a build (exit 2).
#   4. tools/bench/torch_train_bench.py --smoke (tiny CPU runs) with the oracle venv's python,
#      if it exists ($DPTRAIN_VENV, default /opt/dptrain-venv); else SKIP.
#   5. tools/bench/gpu_vs_torch.sh with SMOKE=1 (dptrain and torch on the CPU, fmnist_cnn, a few
#      steps) and two VARIANTS (one known key, one unknown) when BUILD_DIR/dptrain and the venv
#      exist; else SKIP.
#   5b. The bundle pack.sh makes by default (every test binary, libdnnl, the data), packed with xz -0
#      (an upper bound of the real -6 bundle), travels within the device tool's 64 MiB.
#   6. A rehearsal of the whole flow when BUILD_DIR is a CUDA build with test_kernels: pack.sh into
#      a scratch carry folder, then run_all.sh with stand-ins for nvidia-smi, compute-sanitizer,
#      ncu (it runs the program and prints the fixed CSV) and python3 (a fake torch module, so
#      that the info step's torch code runs), the fmnist, profile and kernels steps on the CPU
#      (tiny) and the benchmark in SMOKE mode (if the venv exists): every step's status, the
#      summary's tables and the log archive in $OUT; else SKIP. The gtest step must FAIL there:
#      the stand-in says "GPU" while the tests see none, which is the "no GPU on a GPU host" bug
#      it flags. The profile step must be OK when this dptrain has profile.layers, else FAIL
#      saying that the key is unknown.
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
plan=$(OUT=$out WORK=$tmp/work-never-made CARRY=$tmp/no-carry GTEST_FILTER='' bash tools/gpu/run_all.sh --dry-run --cpu-top1 0.912 2>&1)
rc=$?
if ((rc != 0)); then fail "run_all.sh --dry-run exit $rc: $plan"; fi
filter='*Gpu.*:*Gpu/*.*'
[[ -s tools/gpu/gtest_filter.txt ]] && filter=$(grep -m1 -v '^[[:space:]]*#' tools/gpu/gtest_filter.txt | tr -d '[:space:]')
for want in "run_all plan (dry run" "setup [share 10s]" "info [share 10s]" "gtest [share 130s]" \
  "--gtest_filter='$filter'" "--gtest_output=json:" "DPTRAIN_FASHION_MNIST_DIR=" "compute-sanitizer --tool memcheck" \
  "fmnist [share 45s]: for each of fp32 bf16 fp16" "train.device=cuda" \
  "vs CPU 0.912 (given): fp32 within 0.005 bf16 within 0.01 fp16 within 0.01" \
  "profile [share 60s]" "resnet50 batch 256 bf16 on synthetic data, cuda, 10 steps, profile.layers=6-10; the top 15" \
  "bench [share 190s]" "tools/bench/gpu_vs_torch.sh" "resnet50:256:bf16 cifar_resnet18:128:bf16 fmnist_cnn:128:bf16" \
  "variants: none (VARIANTS)" "sanitizer [share 40s]" "kernels [share 60s]" \
  "--profile-from-start off --metrics gpu__time_duration.sum --cache-control none --clock-control none" \
  "profile.steps=3-3" "--csv --page details" "the top 20 kernels"; do
  [[ $plan == *"$want"* ]] || fail "run_all.sh --dry-run does not say '$want'; it printed:
$plan"
done
# The order: the most informative steps first.
order=$(sed -n 's/^  \([a-z]*\) \[share .*/\1/p' <<<"$plan" | tr '\n' ' ')
[[ $order == "setup info gtest fmnist profile bench sanitizer kernels " ]] || fail "run_all.sh step order: '$order'"
# The shares and the reserve add up to the default budget, and docs/gpu-runbook.md's table says the same.
sum=$(sed -n 's/^  [a-z]* \[share \([0-9]*\)s\].*/\1/p' <<<"$plan" | awk '{ s += $1 } END { print s + 15 }')
((sum == 560)) || fail "run_all.sh's shares + 15 s reserve add up to $sum s, not the default budget 560"
mapfile -t rows < <(sed -n 's/^  \([a-z]*\) \[share \([0-9]*\)s\].*/\1 \2/p' <<<"$plan")
for row in "${rows[@]}" "(summary) 15"; do
  grep -qF -- "| ${row% *} | ${row#* } s |" docs/gpu-runbook.md || fail "docs/gpu-runbook.md's step table has no '| ${row% *} | ${row#* } s |' row"
done
[[ -e $out || -e $tmp/work-never-made ]] && fail "run_all.sh --dry-run created \$OUT or \$WORK"
plan=$(CARRY=$tmp/no-carry FMNIST_PRECISIONS=fp32 bash tools/gpu/run_all.sh --dry-run --only fmnist,bench 2>&1)
[[ $plan == *"gtest: not selected"* && $plan == *"bench [share"* && $plan == *"MISSING: run tools/gpu/pack.sh"* &&
  $plan == *"kernels: not selected"* && $plan == *"final top-1 reported alone: no CPU reference"* ]] || fail "--only fmnist,bench without a carry: $plan"
plan=$(CARRY=$tmp/no-carry GTEST_FILTER='Foo*' bash tools/gpu/run_all.sh --dry-run --only gtest,fmnist,profile --budget 240 2>&1)
[[ $plan == *"budget 240s"* && $plan == *"--gtest_filter='Foo*' (GTEST_FILTER)"* && $plan == *"bench: not selected"* &&
  $plan == *"sanitizer: not selected"* && $plan == *"profile [share"* ]] || fail "--only gtest,fmnist,profile --budget 240: $plan"
plan=$(CARRY=$tmp/no-carry VARIANTS='graph:train.cudnn_api=graph;gpu-data:data.synthetic_device=cuda,data.synthetic_shape=[3,224,224];fused@gpt2+fmnist_cnn:train.gpu_fusion=true' \
  bash tools/gpu/run_all.sh --dry-run 2>&1)
[[ $plan == *"variant graph (dptrain only, on resnet50): --set train.cudnn_api=graph"* &&
  $plan == *"variant gpu-data (dptrain only, on resnet50): --set data.synthetic_device=cuda data.synthetic_shape=[3,224,224]"* &&
  $plan == *"variant fused (dptrain only, on gpt2 fmnist_cnn): --set train.gpu_fusion=true"* ]] ||
  fail "run_all.sh --dry-run with VARIANTS: $plan"
for bad in "--only nonsense" "--only bench,setup" "--frobnicate" "--budget soon"; do
  # shellcheck disable=SC2086  # the words of $bad are the arguments
  bash tools/gpu/run_all.sh --dry-run $bad >/dev/null 2>&1
  rc=$?
  ((rc == 2)) || fail "run_all.sh $bad: exit $rc, want 2"
done
for env in "VARIANTS=graph" "VARIANTS=g:train.x=1;g:train.y=2" "VARIANTS=g@gpt3:train.x=1" "PROFILE_CASE=vgg:1:fp32" "FMNIST_PRECISIONS=fp64" "KERNELS_STEP=0"; do
  env "$env" bash tools/gpu/run_all.sh --dry-run >"$tmp/err" 2>&1
  rc=$?
  ((rc == 2)) || fail "run_all.sh with $env: exit $rc, want 2: $(cat "$tmp/err")"
done
err=$(VARIANTS='g@gpt3:train.x=1' bash tools/gpu/run_all.sh --dry-run 2>&1)
[[ $err == "run_all: VARIANTS: variant 'g' names the model 'gpt3', which is not one of resnet50, cifar_resnet18, fmnist_cnn or gpt2" ]] ||
  fail "run_all.sh with a variant for an unknown model: $err"
pass "run_all.sh --dry-run"

# --- 2. bench_report.py -------------------------------------------------------------------------
cat >"$tmp/results.txt" <<'EOF'
[gpu_vs_torch 01:02:03] a log line that is not a result
RESULT tool=torch model=resnet50 batch=256 dtype=bf16 mode=eager img_s=2874.6 step_ms=89.056 peak_bytes=21474836480 reserved_bytes=23622320128 compile_s=- device=cuda status=ok note=- spread=0.004 steps=5x18
RESULT tool=dptrain model=resnet50 batch=256 dtype=bf16 mode=resident img_s=3105.2 step_ms=82.400 peak_bytes=17179869184 reserved_bytes=18253611008 compile_s=- device=- status=ok note=- steps=169 windows=13
RESULT tool=torch model=cifar_resnet18 batch=128 dtype=fp16 mode=eager img_s=21890.4 step_ms=5.847 peak_bytes=1288490189 reserved_bytes=1610612736 compile_s=- device=cuda status=ok note=- spread=0.011 steps=5x273
RESULT tool=dptrain model=cifar_resnet18 batch=128 dtype=fp16 mode=resident img_s=15002.7 step_ms=8.532 peak_bytes=- reserved_bytes=- compile_s=- device=- status=partial note=time_box_hit_at_step_900 steps=900 windows=14
RESULT tool=torch model=fmnist_cnn batch=128 dtype=fp32 mode=eager img_s=98000.0 step_ms=1.306 peak_bytes=52428800 reserved_bytes=67108864 compile_s=- device=cuda status=ok note=- spread=0.020 steps=5x200
RESULT tool=dptrain model=fmnist_cnn batch=128 dtype=fp32 mode=resident img_s=- step_ms=- peak_bytes=- reserved_bytes=- compile_s=- device=- status=error note=no_train_lines_exit_status_1
RESULT tool=dptrain model=resnet50 batch=256 dtype=bf16 mode=resident variant=graph img_s=7020.4 step_ms=36.466 peak_bytes=22548578304 reserved_bytes=13958643712 compile_s=- device=- status=ok note=- steps=169 windows=13
RESULT tool=dptrain model=resnet50 batch=256 dtype=bf16 mode=resident variant=own-bn img_s=- step_ms=- peak_bytes=- reserved_bytes=- compile_s=- device=- status=unknown_key note=train.bn_impl
RESULT tool=dptrain model=resnet50 batch=256 dtype=bf16 mode=resident variant=lean img_s=- step_ms=- peak_bytes=- status=skipped note=no_time_left
RESULT tool=dptrain model=resnet50 batch=256 dtype=bf16 mode=loader img_s=1985.0 step_ms=128.967 peak_bytes=17448304640 reserved_bytes=18522046464 compile_s=- device=- status=ok note=- steps=169 windows=13
RESULT tool=dptrain model=cifar_resnet18 batch=128 dtype=fp16 mode=- img_s=9001.3 step_ms=14.220 peak_bytes=- reserved_bytes=- compile_s=- device=- status=ok note=- steps=900 windows=14
RESULT tool=torch model=resnet50 batch=128 dtype=bf16 mode=eager img_s=2701.9 step_ms=47.374 peak_bytes=10737418240 reserved_bytes=11811160064 compile_s=- device=cuda status=ok note=- spread=0.006 steps=5x30
RESULT tool=dptrain model=resnet50 batch=128 dtype=bf16 mode=resident img_s=3550.0 step_ms=36.056 peak_bytes=- reserved_bytes=- compile_s=- device=- status=ok note=- steps=300 windows=16
RESULT tool=torch model=resnet50 batch=256 dtype=bf16 mode=compile img_s=6618.0 step_ms=38.682 peak_bytes=19327352832 reserved_bytes=20401094656 compile_s=71.4 device=cuda status=ok note=- spread=0.002 steps=5x21
RESULT tool=torch model=cifar_resnet18 batch=128 dtype=fp16 mode=compile img_s=- step_ms=- peak_bytes=- reserved_bytes=- compile_s=- device=cuda status=oom note=OutOfMemoryError:CUDA_out_of_memory
RESULT tool=torch model=fmnist_cnn batch=128 dtype=fp32 mode=compile img_s=- step_ms=- peak_bytes=- status=skipped note=no_time_left
EOF
variants='graph:train.cudnn_api=graph;own-bn:train.cudnn_api=graph,train.bn_impl=own;lean:train.cuda_graph=true;cg@cifar_resnet18:train.cuda_graph=true,dist.bucket_mb=50'
cat >"$tmp/table.expected" <<'EOF'
model           batch  dtype  variant  dptrain img/s  eager img/s  ratio  compile img/s  ratio  e2e img/s  e2e ratio  dptrain MiB  torch MiB
resnet50          256  bf16   -                 3105         2875  1.08x           6618  0.47x       1985      0.69x        16384      20480
cifar_resnet18    128  fp16   -               15003*        21890  0.69x            oom    n/a       9001      0.41x          n/a       1229
fmnist_cnn        128  fp32   -                error        98000    n/a        skipped    n/a          -          -          n/a         50
resnet50          256  bf16   graph             7020         2875  2.44x           6618  1.06x          -          -        21504      20480
resnet50          256  bf16   own-bn     unknown_key         2875    n/a           6618    n/a          -          -          n/a      20480
resnet50          256  bf16   lean           skipped         2875    n/a           6618    n/a          -          -          n/a      20480
resnet50          128  bf16   -                 3550         2702  1.31x            n/a    n/a          -          -          n/a      10240
dptrain: its batches made on the GPU (data.synthetic_device = cuda), as torch's inputs resident on the GPU: the judged figure; e2e: fed by dptrain's CPU loader and input pipeline (-: not run)
ratio: dptrain img/s / torch img/s, same model, batch and dtype (torch: AMP + channels_last for bf16/fp16, data resident on the GPU; fp32: PyTorch's TF32 default, dptrain train.tf32 = conv)
MiB: peak allocated (dptrain, the judged run: the pool's used-high; torch: eager max_memory_allocated); *: partial (a time box ended the run)
variant graph: train.cudnn_api=graph
variant own-bn: train.cudnn_api=graph train.bn_impl=own (this dptrain build does not know train.bn_impl: unknown key)
variant lean: train.cuda_graph=true
variant cg (cifar_resnet18 only): train.cuda_graph=true dist.bucket_mb=50 (not run)
target (resnet50 bf16 batch 256): dptrain 3105 img/s = 1.08x eager 2875 img/s, peak 16384 vs 20480 MiB: MET (need dptrain >= 1.0x torch eager AMP channels_last and peak memory <= torch's, aim >= 1.2x and >= torch.compile: aim not reached; torch.compile 6618 img/s in this run)
target (resnet50 bf16 batch 256, variant graph): dptrain 7020 img/s = 2.44x eager 2875 img/s, peak 21504 vs 20480 MiB: NOT MET on memory (need dptrain >= 1.0x torch eager AMP channels_last and peak memory <= torch's, aim >= 1.2x and >= torch.compile: aim reached; torch.compile 6618 img/s in this run)
target (resnet50 bf16 batch 256, variant own-bn): n/a, dptrain unknown_key, eager 2875 (need dptrain >= 1.0x torch eager AMP channels_last and peak memory <= torch's, aim >= 1.2x and >= torch.compile)
target (resnet50 bf16 batch 256, variant lean): n/a, dptrain skipped, eager 2875 (need dptrain >= 1.0x torch eager AMP channels_last and peak memory <= torch's, aim >= 1.2x and >= torch.compile)
target (resnet50 bf16 batch 128): dptrain 3550 img/s = 1.31x eager 2702 img/s, peak memory n/a: MET on speed, memory not measured (need dptrain >= 1.0x torch eager AMP channels_last and peak memory <= torch's, aim >= 1.2x and >= torch.compile: aim not reached; torch.compile 6618 img/s on the H200 of 2026-11-26, not measured here)
EOF
python3 tools/bench/bench_report.py table "$tmp/results.txt" --variants "$variants" >"$tmp/table.got" 2>&1 || fail "bench_report.py table exit $?"
if cmp -s "$tmp/table.expected" "$tmp/table.got"; then pass "bench_report.py table, byte for byte"; else
  fail "bench_report.py table differs from the expected table:"
  diff "$tmp/table.expected" "$tmp/table.got" >&2
fi
echo "RESULT tool=torch model=fmnist_cnn batch=8 dtype=fp32 mode=eager img_s=10 status=ok" >"$tmp/no-target.txt"
python3 tools/bench/bench_report.py table "$tmp/no-target.txt" | grep -cx >/dev/null \
  "target (resnet50 bf16): not measured in this run (need dptrain >= 1.0x torch eager AMP channels_last and peak memory <= torch's, aim >= 1.2x and >= torch.compile, 6618 img/s on the H200)" ||
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
want='RESULT tool=dptrain model=resnet50 batch=256 dtype=bf16 mode=resident variant=- img_s=1002.5 step_ms=255.363 peak_bytes=1610612736 reserved_bytes=2147483648 compile_s=- device=- status=ok note=- steps=100 windows=8'
got=$(python3 tools/bench/bench_report.py dptrain "$tmp/run" --model resnet50 --batch 256 --dtype bf16 --rc 0)
[[ $got == "$want" ]] || fail "bench_report.py dptrain:
 got  $got
 want $want"
got=$(python3 tools/bench/bench_report.py dptrain "$tmp/run" --model resnet50 --batch 256 --dtype bf16 --rc 124)
[[ $got == *" status=partial note=time_box_hit_at_step_100 "* ]] || fail "bench_report.py dptrain --rc 124: $got"
got=$(python3 tools/bench/bench_report.py dptrain "$tmp/run" --model resnet50 --batch 256 --dtype bf16 --input loader)
[[ $got == "RESULT tool=dptrain model=resnet50 batch=256 dtype=bf16 mode=loader variant=- img_s=1002.5 "* ]] ||
  fail "bench_report.py dptrain --input loader: $got"
python3 tools/bench/bench_report.py dptrain "$tmp/run" --model resnet50 --batch 256 --dtype bf16 --input disk >/dev/null 2>&1
(($? == 2)) || fail "bench_report.py dptrain --input disk is no usage error"
got=$(python3 tools/bench/bench_report.py dptrain "$tmp/nothing" --model resnet50 --batch 256 --dtype bf16 --rc 1)
rc=$?
[[ $rc == 1 && $got == *" status=error note=no_metrics:No_such_file_or_directory" ]] || fail "bench_report.py dptrain without a run: exit $rc, $got"
# A variant whose key this dptrain does not have: exit 2 and the config error in its log.
printf '%s\n' "[rank 0/1 host] [main] error: --set train.cudnn_api=graph: unknown key 'train.cudnn_api' (did you mean 'train.cudnn_benchmark'?)" >"$tmp/variant.log"
want='RESULT tool=dptrain model=resnet50 batch=256 dtype=bf16 mode=resident variant=graph img_s=- step_ms=- peak_bytes=- reserved_bytes=- compile_s=- device=- status=unknown_key note=train.cudnn_api'
got=$(python3 tools/bench/bench_report.py dptrain "$tmp/nothing" --model resnet50 --batch 256 --dtype bf16 --rc 2 --variant graph --log "$tmp/variant.log")
[[ $got == "$want" ]] || fail "bench_report.py dptrain, a variant's unknown key:
 got  $got
 want $want"
got=$(python3 tools/bench/bench_report.py dptrain "$tmp/nothing" --model resnet50 --batch 256 --dtype bf16 --rc 1 --variant graph --log "$tmp/variant.log")
[[ $got == *" status=error note=no_metrics:"* ]] || fail "bench_report.py dptrain: exit 1 is no unknown key, whatever the log: $got"
pass "bench_report.py dptrain"

# VARIANTS: one line per variant; a ',' that does not start a section.key= belongs to the value.
# A label may name the models it is for after '@' ('*': gpu_vs_torch.sh's VARIANT_MODELS).
got=$(python3 tools/bench/bench_report.py variants -- ' graph:train.cudnn_api=graph ; gpu-data:data.synthetic_device=cuda,data.synthetic_shape=[3,224,224],train.tf32=false;fused@gpt2+cifar_resnet18:train.gpu_fusion=true')
want='graph * train.cudnn_api=graph
gpu-data * data.synthetic_device=cuda data.synthetic_shape=[3,224,224] train.tf32=false
fused gpt2+cifar_resnet18 train.gpu_fusion=true'
[[ $got == "$want" ]] || fail "bench_report.py variants:
 got  $got
 want $want"
[[ -z $(python3 tools/bench/bench_report.py variants -- '') ]] || fail "bench_report.py variants of '' prints something"
for bad in 'graph' 'a b:train.x=1' 'g:train.x=1;g:train.y=2' 'g:train.x=1,train.x=2' 'g:train.x = 1' 'g:trainx=1' '-:train.x=1' 'g:' 'g@:train.x=1' 'g@GPT2:train.x=1' 'g@gpt2+:train.x=1'; do
  err=$(python3 tools/bench/bench_report.py variants -- "$bad" 2>&1)
  rc=$?
  [[ $rc == 2 && $err == "bench_report: VARIANTS: "* ]] || fail "bench_report.py variants '$bad': exit $rc, $err"
done
pass "bench_report.py variants"

# --- 2b. the pure scripts of run_all.sh, against fixed samples -----------------------------------
fx=tests/integration/gpu_scripts
# golden NAME EXPECTED CMD...: CMD's stdout equals the file EXPECTED byte for byte, and CMD exits as wanted (WANT_RC, 0).
golden() {
  local name=$1 expected=$2 rc=0
  shift 2
  "$@" >"$tmp/golden.got" 2>"$tmp/golden.err" || rc=$?
  if ((rc != ${WANT_RC:-0})); then fail "$name: exit $rc, want ${WANT_RC:-0}: $(cat "$tmp/golden.err")"
  elif cmp -s "$expected" "$tmp/golden.got"; then pass "$name, byte for byte"
  else fail "$name differs from $expected:"; diff "$expected" "$tmp/golden.got" >&2; fi
}
golden "layers_table.py (top 15 of a ResNet-50-like layers.json)" $fx/layers.expected python3 tools/gpu/layers_table.py $fx/layers.json
golden "ncu_top.py (top 20 of an Nsight Compute CSV)" $fx/ncu.expected python3 tools/gpu/ncu_top.py $fx/ncu.csv
WANT_RC=1 golden "gtest_report.py --gpu-host (pass, fail, skip, crash)" $fx/gtest.expected \
  python3 tools/gpu/gtest_report.py --dir $fx/gtest --gpu-host test_kernels test_models:1 test_collectives:134
WANT_RC=1 golden "gtest_report.py --gpu-host --brief" $fx/gtest-brief.expected \
  python3 tools/gpu/gtest_report.py --dir $fx/gtest --gpu-host --brief test_kernels test_models:1 test_collectives:134
# Off a GPU host a "no GPU" skip is no bug: one binary with skips only passes.
got=$(python3 tools/gpu/gtest_report.py --dir $fx/gtest --brief test_kernels)
rc=$?
[[ $rc == 0 && $got == "test_kernels 5 passed, 4 skipped" ]] || fail "gtest_report.py without --gpu-host: exit $rc, '$got'"
got=$(python3 tools/gpu/gtest_report.py --dir $fx/gtest --brief test_kernels:124)
[[ $got == "test_kernels 5 passed, 4 skipped (TIMEOUT)" ]] || fail "gtest_report.py with the time box's exit status: '$got'"
# Malformed inputs: a message naming the file and what is wrong, exit 1.
python3 - "$tmp/bad-layers.json" <<'EOF'
import json, sys
doc = json.load(open("tests/integration/gpu_scripts/layers.json"))
del doc["layers"][3]["bwd_ms"]
json.dump(doc, open(sys.argv[1], "w"))
EOF
err=$(python3 tools/gpu/layers_table.py "$tmp/bad-layers.json" 2>&1)
rc=$?
[[ $rc == 1 && $err == "layers_table: $tmp/bad-layers.json: layer 'layer1.0.conv1': no 'bwd_ms'" ]] || fail "layers_table.py, a layer without bwd_ms: exit $rc, $err"
err=$(python3 tools/gpu/layers_table.py "$tmp/nothing.json" 2>&1)
[[ $? == 1 && $err == *"cannot read it"* ]] || fail "layers_table.py without a file: $err"
sed 's/gpu__time_duration.sum/dram__bytes.sum/' $fx/ncu.csv >"$tmp/other-metric.csv"
err=$(python3 tools/gpu/ncu_top.py "$tmp/other-metric.csv" 2>&1)
[[ $? == 1 && $err == *"no gpu__time_duration.sum rows"* ]] || fail "ncu_top.py without the metric: $err"
printf '==PROF== Connected to process 1\n==ERROR== the profiler lacks permission\n' >"$tmp/no-header.csv"
err=$(python3 tools/gpu/ncu_top.py "$tmp/no-header.csv" 2>&1)
[[ $? == 1 && $err == *'no CSV header'* ]] || fail "ncu_top.py without a header: $err"
sed 's/"usecond"/"furlong"/' $fx/ncu.csv >"$tmp/bad-unit.csv"
err=$(python3 tools/gpu/ncu_top.py "$tmp/bad-unit.csv" 2>&1)
[[ $? == 1 && $err == *"unit 'furlong'"* ]] || fail "ncu_top.py with an unknown unit: $err"

# --- 2c. models.sh's synthetic_sets for gpt2 ----------------------------------------------------
# resident: synthetic token windows made on the GPU, no token shard needed; loader: the shard at
# BENCH_TOKENS (refused without it). The resident sets resolve in dptrain --check (a 1-layer GPT-2).
# sets_of INPUT [BENCH_TOKENS]: synthetic_sets' lines for gpt2 batch 16 bf16, 100 steps.
sets_of() {
  (
    unset BENCH_TOKENS
    [[ -n ${2:-} ]] && export BENCH_TOKENS=$2
    # shellcheck source=tools/bench/models.sh
    source tools/bench/models.sh && synthetic_sets cuda gpt2 16 bf16 100 "$1"
  )
}
got=$(sets_of resident | tr '\n' ' ')
[[ $got == *"data.dataset=synthetic data.synthetic_device=cuda data.synthetic_train=1600 data.synthetic_eval=1 "* &&
   $got != *data.path* ]] || fail "synthetic_sets gpt2 resident: not synthetic token windows on the GPU: $got"
got=$(sets_of loader) && fail "synthetic_sets gpt2 loader without BENCH_TOKENS: exit 0: $got"
got=$(sets_of loader "$tmp/t.bin" | tr '\n' ' ')
[[ $got == *"data.dataset=tokens data.path=$tmp/t.bin data.val_path=$tmp/t.bin data.eval_limit=1 "* ]] ||
  fail "synthetic_sets gpt2 loader: not the token shard at BENCH_TOKENS: $got"
if [[ -x $build/dptrain ]]; then
  mapfile -t base < <(sets_of resident)
  got=$("$build/dptrain" models/gpt2.cfg --check --set "${base[@]}" model.n_layer=1 model.n_head=1 model.n_embd=16 2>&1)
  [[ $got == *"data: train synthetic tokens (seed 12345): 1601 windows of 1024 + 1 tokens, vocabulary 50257 (1600 samples used), eval 1 samples"* ]] ||
    fail "dptrain --check with synthetic_sets gpt2 resident: $got"
fi
pass "models.sh synthetic_sets gpt2: resident synthetic tokens, loader the token shard"

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

# --- 5. gpu_vs_torch.sh, CPU smoke, with a variant and a variant this dptrain cannot run -------
if [[ -x $venv_py && -x $build/dptrain ]]; then
  log=$tmp/gpu_vs_torch.log
  if SMOKE=1 PY=$venv_py LOGDIR=$tmp/bench DEADLINE=$(($(date +%s) + 600)) VARIANTS='lr:train.lr=0.02;nokey:train.no_such_key=1;gptonly@gpt2:train.lr=0.5' \
    bash tools/bench/gpu_vs_torch.sh "$build" >"$log" 2>&1; then
    # Columns: dptrain, eager, ratio, compile, ratio, e2e, e2e ratio, dptrain MiB, torch MiB.
    if grep -Eq '^fmnist_cnn +8 +fp32 +- +[0-9]+ +[0-9]+ +[0-9.]+x +n/a +n/a +[0-9]+ +[0-9.]+x +n/a +n/a$' "$log" &&
      grep -Eq '^fmnist_cnn +8 +fp32 +lr +[0-9]+ +[0-9]+ +[0-9.]+x +n/a +n/a +- +- +n/a +n/a$' "$log" &&
      grep -Eq '^fmnist_cnn +8 +fp32 +nokey +unknown_key +[0-9]+ +n/a +n/a +n/a +- +- +n/a +n/a$' "$log" &&
      grep -q '^RESULT tool=dptrain .* mode=loader variant=- .* status=ok ' "$tmp/bench/results.txt" &&
      grep -qx 'variant nokey: train.no_such_key=1 (this dptrain build does not know train.no_such_key: unknown key)' "$log" &&
      grep -q '^RESULT tool=dptrain .* variant=lr .* status=ok ' "$tmp/bench/results.txt" &&
      grep -qx 'variant gptonly (gpt2 only): train.lr=0.5 (not run)' "$log" &&
      ! grep -q 'variant=gptonly' "$tmp/bench/results.txt"; then
      pass "gpu_vs_torch.sh SMOKE=1 with VARIANTS"
    else
      fail "gpu_vs_torch.sh SMOKE=1: no fmnist_cnn rows with the judged, end-to-end and eager numbers, the lr variant's and nokey's unknown key, or gpt2's variant ran on fmnist_cnn:"; cat "$log" >&2
    fi
  else
    fail "gpu_vs_torch.sh SMOKE=1 failed:"; tail -n 30 "$log" >&2
  fi
else
  echo "SKIP: gpu_vs_torch.sh smoke: needs $build/dptrain and $venv_py"
fi

# --- 5b. the real bundle fits the device tool's carry limit --------------------------------------
# What tools/gpu/pack.sh carries by default (every test binary, diffckpt, libdnnl's 39 MB among the
# libraries, Fashion-MNIST), packed as pack.sh packs it (its default XZ_OPT): the total that would travel. (An
# xz -0 bound, used before, passed 64 MiB on 2026-11-26 with 56.4 MiB real: too pessimistic to keep.)
# pack.sh itself fails above LIMIT_MIB (64).
default_tests=(test_runtime test_kernels test_models test_collectives test_launch)
all_built=1
for t in "${default_tests[@]}"; do [[ -x $build/tests/$t ]] || all_built=0; done
if ((all_built)) && [[ -x $build/dptrain && -x $build/diffckpt ]] && ldd "$build/dptrain" 2>/dev/null | grep -q libcudart; then
  data=/usr/share/datasets/fashion-mnist
  [[ -f $data/train-images-idx3-ubyte.gz ]] || data=none
  size_carry=$carry-size
  trap 'rm -rf "$tmp" "${repo:?}/$carry" "${repo:?}/$size_carry"' EXIT
  if ! CARRY_DIR=$size_carry XZ_OPT= CPU_RUN=none FMNIST_DIR=$data bash tools/gpu/pack.sh "$build" >"$tmp/pack-size.log" 2>&1; then
    fail "pack.sh with everything it carries by default (its default xz) is over the limit or failed:"; tail -n 30 "$tmp/pack-size.log" >&2
  else
    total=$(sed -n 's/^\[pack\] total that travels: \([0-9.]*\) MiB of 64 MiB$/\1/p' "$tmp/pack-size.log")
    if [[ -z $total ]] || ! awk -v t="$total" 'BEGIN { exit !(t <= 64) }'; then
      fail "pack.sh's total '$total' MiB (pack.sh's default xz) is not within 64 MiB:"; cat "$tmp/pack-size.log" >&2
    elif ldd "$build/dptrain" | grep -q libdnnl && ! grep -q '^file=lib/libdnnl.so' "$repo/$size_carry/MANIFEST.txt"; then
      fail "dptrain links libdnnl but pack.sh did not carry it:"; cat "$repo/$size_carry/MANIFEST.txt" >&2
    else
      pass "the default bundle (libdnnl included, data $([[ $data == none ]] && echo "left out" || echo carried)) travels $total MiB of 64 with pack.sh's default xz"
    fi
  fi
  rm -rf "${repo:?}/$size_carry"
else
  echo "SKIP: bundle size: $build is not a CUDA build with dptrain, diffckpt and every default test binary"
fi

# --- 6. pack.sh + run_all.sh rehearsal ---------------------------------------------------------
# has_profile_layers: this dptrain has the cfg key profile.layers (its [profile] section lists it).
has_profile_layers() {
  # Read whole before matching: grep -q would stop reading at its match, and the writers' SIGPIPE
  # fails the pipeline under pipefail (seen: the rehearsal then expected the "unknown key" path).
  local ref
  ref=$("$build/dptrain" --print-config-reference 2>/dev/null | awk '/^### /{ p = ($2 == "[profile]") } p')
  # shellcheck disable=SC2016  # backquotes of markdown, not of the shell
  grep -q '^| `layers` |' <<<"$ref"
}
if [[ -x $build/dptrain && -x $build/tests/test_kernels ]] && ldd "$build/dptrain" 2>/dev/null | grep -c libcudart >/dev/null; then
  t_rehearsal=$SECONDS
  data=/usr/share/datasets/fashion-mnist
  [[ -f $data/train-images-idx3-ubyte.gz ]] || data=none
  if ! CARRY_DIR=$carry TESTS=test_kernels XZ_OPT=-0 CPU_RUN=none FMNIST_DIR=$data \
    bash tools/gpu/pack.sh "$build" >"$tmp/pack.log" 2>&1; then
    fail "pack.sh:"; tail -n 20 "$tmp/pack.log" >&2
  else
    mkdir -p "$tmp/fake" "$tmp/fake-py/torch"
    # shellcheck disable=SC2016  # the stand-ins' own code, written as it is
    printf '%s\n' '#!/bin/bash' 'if [[ "$*" == *query-gpu* ]]; then echo "Stand-in GPU, 0.0, 1 MiB"; else echo stand-in; fi' \
      >"$tmp/fake/nvidia-smi"
    # shellcheck disable=SC2016
    printf '%s\n' '#!/bin/bash' \
      'while [[ $1 == --* ]]; do case $1 in --version) echo stand-in; exit 0 ;; --tool | --error-exitcode | --print-limit) shift 2 ;; *) shift ;; esac; done' \
      '"$@"; rc=$?; echo "========= ERROR SUMMARY: 0 errors"; exit $rc' >"$tmp/fake/compute-sanitizer"
    # ncu: records its arguments; runs the program after its options and writes the -o report;
    # --import prints the fixed CSV (what a real ncu prints for such a report).
    # shellcheck disable=SC2016
    printf '%s\n' '#!/bin/bash' "echo \"\$*\" >>'$tmp/ncu.args'" \
      "if [[ \" \$* \" == *' --import '* ]]; then cat '$repo/$fx/ncu.csv'; exit 0; fi" \
      'out=""; while [[ $1 == -* ]]; do case $1 in --version) echo stand-in; exit 0 ;; -o) out=$2; shift 2 ;; -f) shift ;; *) shift 2 ;; esac; done' \
      '"$@"; rc=$?; [[ -n $out ]] && echo stand-in >"$out.ncu-rep"; exit $rc' >"$tmp/fake/ncu"
    # python3 with a fake torch module first on its path: the info step's torch code runs as it is.
    printf '%s\n' '#!/bin/bash' "PYTHONPATH='$tmp/fake-py'\${PYTHONPATH:+:\$PYTHONPATH} exec '$(command -v python3)' \"\$@\"" >"$tmp/fake/python3"
    cat >"$tmp/fake-py/torch/__init__.py" <<'EOF'
# A stand-in for torch: the attributes tools/gpu/run_all.sh's info step reads.
from types import SimpleNamespace
__version__ = "9.9.9+stand-in"
version = SimpleNamespace(cuda="13.0")
backends = SimpleNamespace(cudnn=SimpleNamespace(version=lambda: 91900))
cuda = SimpleNamespace(nccl=SimpleNamespace(version=lambda: (2, 28, 9)), device_count=lambda: 1)
EOF
    chmod +x "$tmp/fake/nvidia-smi" "$tmp/fake/compute-sanitizer" "$tmp/fake/ncu" "$tmp/fake/python3"
    bench=(--skip bench)
    [[ -x $venv_py ]] && bench=()
    rc=0
    PATH=$tmp/fake:$PATH OUT=$tmp/out WORK=$tmp/work CARRY=$repo/$carry FMNIST_DEVICE=cpu FMNIST_EPOCHS=1 \
      FMNIST_PRECISIONS=fp32 FMNIST_SETS="data.train_limit=1000 data.eval_limit=500 train.warmup_steps=2" FMNIST_TOL=1 \
      PROFILE_CASE=fmnist_cnn:8:fp32 PROFILE_DEVICE=cpu PROFILE_WARMUP=1 PROFILE_WINDOW=2 KERNELS_STEP=2 \
      SMOKE=1 BENCH_PY=$venv_py VARIANTS='nokey:train.no_such_key=1' \
      bash tools/gpu/run_all.sh --budget 400 --cpu-top1 0.5 "${bench[@]}" >"$tmp/run_all.log" 2>&1 || rc=$?
    sum=$tmp/out/summary.txt
    bad=0
    # step STATUS [NOTE-PATTERN]: the summary's row of the step.
    want_step() {
      # shellcheck disable=SC2016  # quotes around the pattern in the message
      grep -Eq "^$1 +$2 +[0-9]+  ${3:-}" "$sum" 2>/dev/null || { bad=1; fail "run_all.sh rehearsal: step $1 is not $2${3:+ with a note like '$3'}"; }
    }
    want_step setup OK
    want_step info OK "Stand-in GPU, 0.0, 1 MiB; torch 9.9.9\+stand-in CUDA 13.0 cuDNN 91900 NCCL 2.28.9 GPUs 1"
    # The stand-in says GPU, the tests see none: each GPU test's "no GPU" skip is the bug it flags.
    want_step gtest FAIL "test_kernels [0-9]+ passed, [1-9][0-9]* skipped; BUG: [1-9][0-9]* skipped for lack of a GPU on this GPU host"
    grep -Eq '^  test_kernels [A-Za-z]+Gpu[./].*: no GPU  <- BUG: skipped for lack of a GPU on a GPU host$' "$sum" ||
      { bad=1; fail "run_all.sh rehearsal: the summary lists no skipped test with its reason"; }
    if [[ $data == none ]]; then want_step fmnist SKIP; else want_step fmnist OK "cpu, CPU top-1 0.5 \(given\); fp32 top1 0\.[0-9]+"; fi
    if has_profile_layers; then
      want_step profile OK "fmnist_cnn batch 8 fp32, cpu, steps 2-3 of 3: [0-9.]+ ms a step, [0-9]+ layers \(table below\)"
      grep -q '^accounting: layers .* (adds up)$' "$sum" || { bad=1; fail "run_all.sh rehearsal: no profile table, or it does not add up"; }
    else
      want_step profile FAIL "fmnist_cnn batch 8 fp32, cpu, steps 2-3 of 3: this dptrain build rejects profile.layers \(unknown key\)"
    fi
    if ((${#bench[@]} == 0)); then
      want_step bench OK "table below; logs in bench/; variants this dptrain build cannot run \(unknown key\): nokey \(train.no_such_key\)"
      grep -Eq '^fmnist_cnn +8 +fp32 +nokey +unknown_key ' "$sum" || { bad=1; fail "run_all.sh rehearsal: no variant row in the summary"; }
    fi
    want_step sanitizer OK
    want_step kernels OK "step 2 of fmnist_cnn batch 8 fp32: kernels: 24 distinct, 63 launches, 58.622 ms of GPU time in all"
    grep -qx 'the other 4 kernels: 0.012 ms (0.0%)' "$sum" || { bad=1; fail "run_all.sh rehearsal: no kernel table in the summary"; }
    if ! grep -q -- "--target-processes all --profile-from-start off --metrics gpu__time_duration.sum --cache-control none --clock-control none -f -o $tmp/work/logs/kernels/report env LD_LIBRARY_PATH=.* $tmp/work/build/dptrain .* profile.steps=2-2$" "$tmp/ncu.args" ||
      ! grep -qx -- "--import $tmp/work/logs/kernels/report.ncu-rep --csv --page details" "$tmp/ncu.args"; then
      bad=1; fail "run_all.sh rehearsal: ncu was not called as the kernels step should: $(cat "$tmp/ncu.args")"
    fi
    for f in logs/gtest/test_kernels.log logs/gtest/test_kernels.json logs/kernels/kernels.csv logs/info.log; do
      tar -tzf "$tmp/out/logs.tar.gz" 2>/dev/null | grep -cx "$f" >/dev/null || { bad=1; fail "run_all.sh rehearsal: no $f in \$OUT/logs.tar.gz"; }
    done
    # keep_run.sh files the summary as docs/gpu-runs/<date>-<gpu>.txt, verbatim, and never twice.
    kept=$(GPU_RUNS_DIR=$tmp/gpu-runs bash tools/gpu/keep_run.sh "$sum" 2>&1)
    want_kept="$tmp/gpu-runs/$(date -u +%F)-stand-in-gpu.txt"
    if [[ $kept != "$want_kept" ]] || ! cmp -s "$sum" "$want_kept"; then
      bad=1; fail "keep_run.sh: printed '$kept', want '$want_kept' holding the summary"
    elif GPU_RUNS_DIR=$tmp/gpu-runs bash tools/gpu/keep_run.sh "$sum" >/dev/null 2>&1; then
      bad=1; fail "keep_run.sh overwrote $want_kept"
    fi
    ((rc == 1)) || { bad=1; fail "run_all.sh rehearsal: exit $rc, want 1 (the gtest step's flagged skips)"; }
    if ((bad)); then cat "$tmp/run_all.log" >&2; else
      pass "pack.sh + run_all.sh rehearsal in $((SECONDS - t_rehearsal)) s (stand-in GPU tools${bench[*]:+, no bench})"
    fi
  fi
else
  echo "SKIP: pack.sh + run_all.sh rehearsal: $build is not a CUDA build with dptrain and tests/test_kernels"
fi

if ((failures)); then echo "test_gpu_scripts: $failures failure(s)" >&2; exit 1; fi
echo "test_gpu_scripts: all passed"
