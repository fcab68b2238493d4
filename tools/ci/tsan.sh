#!/usr/bin/env bash
# ThreadSanitizer over the stop path (issue 28): a clang-14 TSan build of dptrain and the launcher
# tests in build-tsan/ (CPU only), then the signal, launcher and fault tests, which start the real
# binary, SANITIZE_REPEAT times beside a busy loop. Not a CI phase (its build costs another
# ~13 minutes of CI's 90); run it by hand when the stop path, the signal thread or the threads
# around a step change:
#   tools/ci/tsan.sh
# The runs use one OpenMP thread per rank (the tests' train.threads = 1), so libgomp, which is not
# instrumented, starts no threads whose synchronisation TSan could not see. Environment:
# TSAN_BUILD_DIR (default build-tsan), JOBS, SANITIZE_REPEAT (default 10).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
build=${TSAN_BUILD_DIR:-build-tsan}
jobs=${JOBS:-$(nproc)}
repeat=${SANITIZE_REPEAT:-10}
launcher=()
if command -v ccache > /dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache); fi
CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDPTRAIN_ENABLE_CUDA=OFF \
  -DDPTRAIN_TSAN=ON -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" "${launcher[@]}" > /dev/null
cmake --build "$build" -j "$jobs" --target dptrain diffckpt test_launch test_collectives
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1}
export ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-$(command -v llvm-symbolizer-14 || true)}
sh -c 'while :; do :; done' &
busy=$!
trap 'kill "$busy" 2> /dev/null || true' EXIT
ctest --test-dir "$build" -R '^(Signals|SignalAction|LocalLauncher|RingFaults|Stragglers)\.' \
  --repeat "until-fail:$repeat" --output-on-failure -j 2 --timeout 600
