#!/usr/bin/env bash
# collbench_hosts.sh: the ring's flat and hierarchical all-reduce side by side on the 4-host test
# cluster (tools/slurm/fixture.sh, SLURM_FIXTURE_HOSTS=4: hosts h1..h4 in network namespaces, 2
# ranks each, shared memory within a host, TCP over veth pairs across). A benchmark, not a test.
#
#   tools/bench/collbench_hosts.sh [BUILD_DIR]      (default: build; needs BUILD_DIR/collbench)
#
# Starts its own cluster (root, the Slurm packages) and stops it on exit. Environment:
# MIN_BYTES (4), MAX_BYTES (67108864), FACTOR (4), ITERS (20), WARMUP (5), REPEAT (3), MPI (pmix).
# Each repeat runs `srun -N4 -n8 collbench --op allreduce --allreduce both`; the table keeps the
# best (lowest) time of each algorithm per size: on a shared machine one run is noisy.
# Output: a row per size: flat and hierarchical time (us) and busbw (GB/s), and hierarchical's
# speed-up (flat time / hierarchical time). The namespaces' veth links are memory copies in one
# kernel, so "across hosts" is cheaper here than on a real network: the speed-up on a cluster
# is larger where the network is slower than shared memory.
set -euo pipefail

BUILD=${1:-build}
MIN_BYTES=${MIN_BYTES:-4}
MAX_BYTES=${MAX_BYTES:-67108864}
FACTOR=${FACTOR:-4}
ITERS=${ITERS:-20}
WARMUP=${WARMUP:-5}
REPEAT=${REPEAT:-3}
MPI=${MPI:-pmix}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
COLLBENCH=$(cd "$BUILD" && pwd)/collbench
[[ -x $COLLBENCH ]] || { echo "collbench_hosts: $COLLBENCH is not built (ninja -C $BUILD collbench)" >&2; exit 2; }

work=$(mktemp -d /tmp/dptrain-collbench-hosts.XXXXXX)
chmod 0755 "$work"
fixture=$repo/tools/slurm/fixture.sh
trap '"$fixture" stop "$work/slurm" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
SLURM_FIXTURE_HOSTS=4 SLURM_FIXTURE_OWNER=$$ "$fixture" start "$work/slurm" >/dev/null

for i in $(seq "$REPEAT"); do
  "$fixture" run "$work/slurm" srun --mpi="$MPI" -N4 -n8 -t 10 "$COLLBENCH" --op allreduce --allreduce both \
    -b "$MIN_BYTES" -e "$MAX_BYTES" -f "$FACTOR" --iters "$ITERS" --warmup "$WARMUP" 2>/dev/null >"$work/run-$i.out"
done

# Rows "  size count type redop time algbw busbw err" under "# collbench: ring, <algo> all-reduce".
printf "%12s %14s %14s %12s %12s %9s\n" "size(B)" "flat(us)" "hier(us)" "flat GB/s" "hier GB/s" "speed-up"
awk '
  /^# collbench: ring, flat/ { algo = "flat"; next }
  /^# collbench: ring, hierarchical/ { algo = "hier"; next }
  /^ +[0-9]/ && algo != "" {
    key = algo SUBSEP $1
    if (!(key in best) || $5 < best[key]) { best[key] = $5; busbw[key] = $7 }
    sizes[$1] = 1
  }
  END {
    for (s in sizes) {
      f = best["flat" SUBSEP s]; h = best["hier" SUBSEP s]
      printf "%12d %14.1f %14.1f %12.4f %12.4f %8.2fx\n", s, f, h, busbw["flat" SUBSEP s], busbw["hier" SUBSEP s], (h > 0 ? f / h : 0)
    }
  }' "$work"/run-*.out | sort -n
