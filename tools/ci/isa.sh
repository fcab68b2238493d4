#!/usr/bin/env bash
# CI (issue 28): every instruction set this CPU has, down to AVX2. The first ctest pass ran the
# suite on the widest ISA the CPU has; when that is AVX-512, this runs the tests that use oneDNN
# or our own vectorised loops again with oneDNN limited to AVX2 (ONEDNN_MAX_CPU_ISA=AVX2, which
# Debian's oneDNN 2.6.3 reads, as DNNL_MAX_CPU_ISA; our loops' clones follow oneDNN's effective
# ISA: kernels/cpu/isa.h), i.e. what an AVX2-only CPU of this project's machines runs: the GEMM
# library auto picks, the convolution algorithm, the allocation-free steps, the stop path under
# signals. On an AVX2-only CPU the first pass already ran the AVX2 paths natively: nothing to add.
# OpenBLAS picks its own kernels by the CPU and is not limited here. This pass also hides MKL
# (DPTRAIN_MKL_DIR names no folder): issue 33's "a CI job without MKL present still passes". On an
# Intel CPU, where train.cpu_gemm = "auto" takes MKL in the first pass, it runs the fallback
# (oneDNN, OpenBLAS) instead; the MKL tests skip, saying so.
#   tools/ci/isa.sh        (after tools/setup.sh; uses build/)
# Environment: ISA_LABELS (ctest -L regex, default the labels whose tests run oneDNN: the unit
# tests of kernels, models and launch, and the PyTorch oracles), ISA_REPEAT (how often the
# stop-path tests run under the limit beside a busy loop, default 5).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
build=${BUILD_DIR:-build}
labels=${ISA_LABELS:-^(kernels|models|launch|oracle)$}
repeat=${ISA_REPEAT:-5}
t0=$(date +%s)
# oneDNN's own answer to what this CPU has (the test prints it and checks our clones follow it).
line=$("$build/tests/test_kernels" --gtest_filter='CloneIsa.FollowsOnednnsEffectiveIsaAndItsLimit' | grep "oneDNN's effective ISA")
isa=$(sed -E "s/oneDNN's effective ISA: ([a-z0-9_]+).*/\1/" <<< "$line")
echo "[isa] $line ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'))"
case $isa in
  avx512* | amx*) ;;
  avx2*)
    echo "[isa] this CPU's widest ISA is $isa: the first pass ran the AVX2 paths natively, nothing to add"
    exit 0 ;;
  *)
    echo "[isa] this CPU has no AVX2 ($isa): the first pass ran its paths natively, nothing to add"
    exit 0 ;;
esac
export ONEDNN_MAX_CPU_ISA=AVX2
export DPTRAIN_MKL_DIR=/nonexistent/dptrain-ci-without-mkl
limited=$("$build/tests/test_kernels" --gtest_filter='CloneIsa.FollowsOnednnsEffectiveIsaAndItsLimit' | grep "oneDNN's effective ISA")
echo "[isa] limited: $limited"
grep -q "oneDNN's effective ISA: avx2 (limit: AVX2); our clones: avx2" <<< "$limited" ||
  { echo "[isa] error: ONEDNN_MAX_CPU_ISA=AVX2 did not limit oneDNN and our clones to AVX2: $limited" >&2; exit 1; }
echo "[isa] the tests labelled $labels with ONEDNN_MAX_CPU_ISA=AVX2, without MKL (DPTRAIN_MKL_DIR=$DPTRAIN_MKL_DIR)"
ctest --test-dir "$build" -L "$labels" --output-on-failure -j 2
# Two integration tests that train several ranks for real: DDP on Fashion-MNIST, and Slurm's
# requeue, whose USR1 reaches ranks in the middle of a step.
ctest --test-dir "$build" -R '^integration\.(test_ddp_fmnist|test_submit_requeue)$' --output-on-failure -j 2
# The GPT benchmark's step (tools/bench/gpt_vs_torch.py's dptrain side), small, on both GEMM
# libraries: it must train (a finite loss) under the limit.
for gemm in auto onednn openblas; do
  out=$("$build/gpt_step_bench" 2 2 64 64 65 4 1 2 0 onednn "$gemm")
  grep -Eq '"loss": [0-9]+\.[0-9]+' <<< "$out" || { echo "[isa] error: gpt_step_bench ($gemm) under the limit: $out" >&2; exit 1; }
  echo "[isa] gpt_step_bench smoke ($gemm): $out"
done
t1=$(date +%s)
# The stop path under the limit, looped beside a busy loop: oneDNN's AVX2 GEMM moves the stack
# pointer into the heap, where a signal handler's frame once landed (launch/signal_thread.h).
sh -c 'while :; do :; done' &
busy=$!
trap 'kill "$busy" 2> /dev/null || true' EXIT
echo "[isa] the stop-path tests $repeat times under the limit beside a busy loop"
ctest --test-dir "$build" -R '^(Signals|LocalLauncher)\.' --repeat "until-fail:$repeat" --output-on-failure -j 2
echo "[isa] tests $((t1 - t0)) s, stop-path loop $(($(date +%s) - t1)) s"
