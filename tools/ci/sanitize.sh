#!/usr/bin/env bash
# CI (issue 14): the unit tests under AddressSanitizer + UndefinedBehaviorSanitizer, and the
# libFuzzer targets, from one clang build in build-sanitize/ (CPU only: the CUDA paths are not
# built there). Fails on any sanitizer report (UBSan errors are fatal, ASan's always are).
#   tools/ci/sanitize.sh            configure, build, run the unit tests (labels base, kernels,
#                                   runtime, collectives, models, tools), then the launcher, signal
#                                   and fault tests (the real dptrain binary, sanitized, several
#                                   processes) SANITIZE_REPEAT times beside a busy loop
# Environment: SANITIZE_BUILD_DIR (default build-sanitize), JOBS (default: all cores),
# SANITIZE_LABELS (ctest -L regex), SANITIZE_EXCLUDE (ctest -E regex), SANITIZE_REPEAT (default 3). tools/ci/fuzz.sh runs the
# fuzzers of the same build.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
build=${SANITIZE_BUILD_DIR:-build-sanitize}
jobs=${JOBS:-$(nproc)}
labels=${SANITIZE_LABELS:-^(base|kernels|runtime|collectives|models|tools)$}
# The 64 MiB ring sweeps run 4-10 minutes each under ASan on a loaded 2-core machine and hit their
# own hang limit; the smaller sweeps (EveryOpDtypeReductionAndSize*) cover the same code paths.
exclude=${SANITIZE_EXCLUDE:-Every64MiB}
t0=$(date +%s)
launcher=()
if command -v ccache > /dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache); fi
# -O1 and line tables only (ASan's own advice): about a quarter less compile time than -O2 -g on
# this code, and reports still name file:line. -Wno-pass-failed: clang does not vectorize at -O1,
# so every `#pragma omp simd` loop warned that the transformation it asks for did not happen (70
# warnings per build, none of them a defect: the pragma is for the optimised builds).
CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDPTRAIN_ENABLE_CUDA=OFF \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG -Wno-pass-failed" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" -DDPTRAIN_FUZZ=ON "${launcher[@]}" > /dev/null
# Only what the labels above run (and the binaries their tests start), plus the fuzzers.
targets=(test_base test_kernels test_runtime test_collectives test_models test_tools test_launch dptrain ckptinfo diffckpt collbench
         dptrain_probe fuzz_store_protocol fuzz_ring_frames fuzz_safetensors_header fuzz_config fuzz_npy fuzz_tar_index fuzz_idx fuzz_image)
echo "[sanitize] building in $build with $jobs jobs (clang-14, ASan + UBSan, fuzzers)"
cmake --build "$build" -j "$jobs" --target "${targets[@]}"
t1=$(date +%s)
# Fork-heavy tests exit children with _exit: leak checks there would only report what the child
# never freed on purpose. Everything else is on, and fatal.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-$(command -v llvm-symbolizer-14 || true)}
echo "[sanitize] unit tests (labels $labels)"
ctest --test-dir "$build" -L "$labels" -E "$exclude" --output-on-failure -j 2 --timeout 1200
t2=$(date +%s)
# The stop path and the faults through the sanitized binary, looped under load (issue 28: a
# heap corruption there showed only under load, and only sometimes): a report fails the run.
repeat=${SANITIZE_REPEAT:-3}
stop_tests='^(Signals|SignalAction|LocalLauncher|RingFaults|Stragglers|FlightRecorder)\.'
sh -c 'while :; do :; done' &
busy=$!
trap 'kill "$busy" 2> /dev/null || true' EXIT
echo "[sanitize] the stop-path and fault tests $repeat times beside a busy loop"
ctest --test-dir "$build" -R "$stop_tests" --repeat "until-fail:$repeat" --output-on-failure -j 2 --timeout 600
kill "$busy" 2> /dev/null || true
echo "[sanitize] build $((t1 - t0)) s, tests $((t2 - t1)) s, stop-path loop $(( $(date +%s) - t2 )) s"
