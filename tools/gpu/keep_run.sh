#!/usr/bin/env bash
# keep_run.sh: files a GPU run's summary (what tools/gpu/run_all.sh wrote to $OUT/summary.txt and
# the device tool brought back) verbatim as docs/gpu-runs/<date>-<gpu>.txt, the record issue 21
# asks for. The date and the GPU come from the summary's first line
# ("== dptrain GPU run 2026-11-26 21:14:03 UTC, ...; NVIDIA H200, 0.0, 143771 MiB; <commit>"):
# the GPU's name lower-cased, "NVIDIA " dropped, spaces as dashes (h200, h100-80gb-hbm3).
#
#   tools/gpu/keep_run.sh FILES_AT/summary.txt [NAME]     NAME: the GPU part of the file name
#
# Refuses to overwrite a record (a second run the same day: give NAME, e.g. h200-2). Environment:
# GPU_RUNS_DIR (default docs/gpu-runs). Prints the path written.
set -euo pipefail
die() { echo "keep_run.sh: $*" >&2; exit 2; }
sum=${1:?usage: keep_run.sh SUMMARY [NAME]}
[[ -s $sum ]] || die "$sum is missing or empty"
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dir=${GPU_RUNS_DIR:-$repo/docs/gpu-runs}
first=$(head -n 1 "$sum")
[[ $first =~ ^==\ dptrain\ GPU\ run\ ([0-9]{4}-[0-9]{2}-[0-9]{2})\  ]] ||
  die "$sum does not start with run_all.sh's summary line ('== dptrain GPU run <date> ...'): not a run_all.sh summary"
day=${BASH_REMATCH[1]}
name=${2:-}
if [[ -z $name ]]; then
  gpu=$(awk -F'; ' '{ print $2 }' <<<"$first" | cut -d, -f1)
  [[ -n $gpu && $gpu != "GPU not read" ]] || die "the summary names no GPU ('$first'): give NAME"
  name=$(sed -E 's/^NVIDIA //; s/ +/-/g' <<<"$gpu" | tr '[:upper:]' '[:lower:]')
fi
[[ $name =~ ^[a-z0-9][a-z0-9._-]*$ ]] || die "'$name' is not a file-name part (lower-case letters, digits, . _ -)"
out=$dir/$day-$name.txt
[[ -e $out ]] && die "$out exists: give another NAME (e.g. $name-2)"
mkdir -p "$dir"
cp "$sum" "$out"
echo "$out"
