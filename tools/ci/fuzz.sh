#!/usr/bin/env bash
# CI (issue 14): runs every libFuzzer target of tools/fuzz for FUZZ_SECONDS (default 60) each,
# starting from its seed corpus (tools/fuzz/corpus/<target>/; new inputs go to a scratch copy,
# never into the repo). Fails on the first crash, leak, timeout or sanitizer report; the input
# that did it is kept in $FUZZ_ARTIFACTS (default build-sanitize/fuzz/artifacts) and printed.
# Needs the build of tools/ci/sanitize.sh (SANITIZE_BUILD_DIR).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
build=${SANITIZE_BUILD_DIR:-build-sanitize}
seconds=${FUZZ_SECONDS:-60}
artifacts=${FUZZ_ARTIFACTS:-$build/fuzz/artifacts}
mkdir -p "$artifacts"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-$(command -v llvm-symbolizer-14 || true)}
# The seconds one input may take: an image at PIL's pixel limit (178,956,970, kMaxImagePixels) is
# a real input, and its decode and resize take about 11 s under ASan here (a 600-byte JPEG header
# can claim one: tests/runtime/data/test_image_decode.cpp), so fuzz_image gets more.
unit_timeout() { case $1 in fuzz_image) echo 60 ;; *) echo 10 ;; esac; }
status=0
for target in fuzz_store_protocol fuzz_ring_frames fuzz_safetensors_header fuzz_config fuzz_npy fuzz_tar_index fuzz_idx fuzz_image; do
  bin=$build/fuzz/$target
  [ -x "$bin" ] || { echo "[fuzz] $bin missing: run tools/ci/sanitize.sh first" >&2; exit 2; }
  work=$(mktemp -d "/tmp/dptrain-fuzz-$target.XXXXXX")
  scratch=$(mktemp -d "/tmp/dptrain-fuzz-scratch.XXXXXX")  # what a target writes (its TMPDIR)
  cp -r "tools/fuzz/corpus/$target/." "$work/"
  t0=$(date +%s)
  if TMPDIR=$scratch "$bin" "$work" -max_total_time="$seconds" -timeout="$(unit_timeout "$target")" -rss_limit_mb=2048 -max_len=65536 \
      -artifact_prefix="$artifacts/$target-" -print_final_stats=1 > "$artifacts/$target.log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$artifacts/$target.log" | grep -o '[0-9]*$' || echo "?")
    echo "[fuzz] $target: no crash in $(( $(date +%s) - t0 )) s ($runs inputs)"
  else
    echo "[fuzz] $target FAILED; its log:" >&2
    tail -60 "$artifacts/$target.log" >&2
    status=1
  fi
  rm -rf "$work" "$scratch"
done
exit $status
