#!/usr/bin/env bash
# collbench_vs_mpi.sh: the ring backend's allreduce (tools/collbench) against OpenMPI's
# MPI_Allreduce and a plain memcpy, on this machine, same sizes, same run. A benchmark, not a test.
#
#   tools/bench/collbench_vs_mpi.sh [BUILD_DIR]        (default: build; needs BUILD_DIR/collbench)
#
# Installs openmpi-bin and libopenmpi-dev with apt-get when mpicc is missing (root, or sudo).
# Builds a tiny MPI_Allreduce timing program and a memcpy timing program from the heredocs below
# into a temporary directory. Environment: NPROCS ("2 4"), MIN_BYTES (4), MAX_BYTES (67108864),
# FACTOR (2), ITERS (20), WARMUP (5), REPEAT (3). Every program measures the same way: f32 sum,
# WARMUP untimed iterations, a barrier, ITERS blocking iterations; time = mean per iteration, max
# over ranks; busbw = size / time x 2(n-1)/n. Ring and MPI runs alternate REPEAT times and the
# table keeps each one's best (lowest) time per size: on a shared machine one run is noisy.
#
# Output: one table, a row per (ranks, size): ring and MPI latency (us) and their ratio (ring /
# MPI; < 1.5 is the target for small messages), ring and MPI busbw (GB/s) and their ratio (ring /
# MPI, i.e. MPI time / ring time; >= 1.0 is the target from 1 MiB up), and memcpy's bandwidth
# (size / time of one memcpy).
set -euo pipefail

BUILD=${1:-build}
NPROCS=${NPROCS:-"2 4"}
MIN_BYTES=${MIN_BYTES:-4}
MAX_BYTES=${MAX_BYTES:-67108864}
FACTOR=${FACTOR:-2}
ITERS=${ITERS:-20}
WARMUP=${WARMUP:-5}
REPEAT=${REPEAT:-3}

COLLBENCH=$BUILD/collbench
[[ -x $COLLBENCH ]] || { echo "collbench_vs_mpi: $COLLBENCH is not built (ninja -C $BUILD collbench)" >&2; exit 2; }

if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
  SUDO=""
  [[ $(id -u) -eq 0 ]] || SUDO=sudo
  echo "collbench_vs_mpi: installing openmpi-bin libopenmpi-dev" >&2
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openmpi-bin libopenmpi-dev >&2
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

cat >"$TMP/mpi_allreduce.c" <<'EOF'
/* MPI_Allreduce (f32, sum) timing: argv min max factor iters warmup; prints "size time_us busbw". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  size_t lo = strtoull(argv[1], 0, 10), hi = strtoull(argv[2], 0, 10);
  double factor = atof(argv[3]);
  int iters = atoi(argv[4]), warmup = atoi(argv[5]);
  float* buf = malloc(hi + 64);
  memset(buf, 0, hi + 64);
  long last = -1;
  /* Connections are set up lazily: a few untimed small allreduces first. */
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < 20; ++i) MPI_Allreduce(MPI_IN_PLACE, buf, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  for (double b = lo; b <= hi * (1 + 1e-9); b = b * factor > b + 1 ? b * factor : b + 1) {
    long count = (long)((size_t)b / sizeof(float));
    if (count == 0 || count == last) continue;
    last = count;
    for (int i = 0; i < warmup; ++i) MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double t = (MPI_Wtime() - t0) / iters, tmax;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double bytes = (double)count * sizeof(float);
    if (rank == 0) printf("%.0f %.2f %.4f\n", bytes, tmax * 1e6, bytes / tmax / 1e9 * 2.0 * (n - 1) / n);
  }
  free(buf);
  MPI_Finalize();
  return 0;
}
EOF

cat >"$TMP/memcpy_bw.c" <<'EOF'
/* memcpy timing: argv min max factor iters warmup; prints "size GB/s" (size / time of one copy). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void) { struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec + ts.tv_nsec * 1e-9; }
int main(int argc, char** argv) {
  size_t lo = strtoull(argv[1], 0, 10), hi = strtoull(argv[2], 0, 10);
  double factor = atof(argv[3]);
  int iters = atoi(argv[4]), warmup = atoi(argv[5]);
  char* src = malloc(hi + 64); char* dst = malloc(hi + 64);
  memset(src, 1, hi + 64); memset(dst, 0, hi + 64);
  long last = -1;
  for (double b = lo; b <= hi * (1 + 1e-9); b = b * factor > b + 1 ? b * factor : b + 1) {
    long count = (long)((size_t)b / 4);
    if (count == 0 || count == last) continue;
    last = count;
    size_t bytes = (size_t)count * 4;
    int reps = iters; /* small copies: repeat enough to be measurable */
    while ((double)reps * bytes < 64e6 && reps < 1000000) reps *= 2;
    for (int i = 0; i < warmup; ++i) memcpy(dst, src, bytes);
    double t0 = now();
    for (int i = 0; i < reps; ++i) { memcpy(dst, src, bytes); __asm__ volatile("" ::"r"(dst) : "memory"); }
    double t = (now() - t0) / reps;
    printf("%zu %.4f\n", bytes, bytes / t / 1e9);
  }
  return 0;
}
EOF

mpicc -O2 -o "$TMP/mpi_allreduce" "$TMP/mpi_allreduce.c"
cc -O2 -o "$TMP/memcpy_bw" "$TMP/memcpy_bw.c"

MPIRUN=(mpirun --oversubscribe --bind-to none)
[[ $(id -u) -ne 0 ]] || MPIRUN+=(--allow-run-as-root)

"$TMP/memcpy_bw" "$MIN_BYTES" "$MAX_BYTES" "$FACTOR" "$ITERS" "$WARMUP" >"$TMP/memcpy.txt"
# best_of FILES...: per size the row with the lowest time ("size time busbw" rows), by size.
best_of() {
  awk '!($1 in t) || $2 < t[$1] { t[$1] = $2; b[$1] = $3 } END { for (s in t) print s, t[s], b[s] }' "$@" | sort -n
}

for n in $NPROCS; do
  for rep in $(seq 1 "$REPEAT"); do
    echo "collbench_vs_mpi: $n ranks, run $rep/$REPEAT: collbench (ring)" >&2
    "$COLLBENCH" --nproc "$n" --op allreduce --dtype f32 --min-bytes "$MIN_BYTES" --max-bytes "$MAX_BYTES" \
      --factor "$FACTOR" --iters "$ITERS" --warmup "$WARMUP" >"$TMP/ring.raw"
    grep -q '^\[rank 0\] # collbench: OK' "$TMP/ring.raw" || { echo "collbench reported errors:" >&2; cat "$TMP/ring.raw" >&2; exit 1; }
    # rank 0's rows: "[rank 0]   size count type redop time algbw busbw err" -> "size time busbw"
    sed -n 's/^\[rank 0\] //p' "$TMP/ring.raw" | awk '!/^#/ && NF >= 8 {print $1, $5, $7}' >"$TMP/ring_${n}_$rep.txt"
    echo "collbench_vs_mpi: $n ranks, run $rep/$REPEAT: MPI_Allreduce ($(mpirun --version 2>&1 | head -1))" >&2
    "${MPIRUN[@]}" -np "$n" "$TMP/mpi_allreduce" "$MIN_BYTES" "$MAX_BYTES" "$FACTOR" "$ITERS" "$WARMUP" \
      >"$TMP/mpi_${n}_$rep.txt"
  done
  best_of "$TMP"/ring_"$n"_*.txt >"$TMP/ring_$n.txt"
  best_of "$TMP"/mpi_"$n"_*.txt >"$TMP/mpi_$n.txt"
done

echo "# allreduce f32 sum: ring (collbench) vs OpenMPI MPI_Allreduce vs memcpy; host $(hostname), $(nproc) cores;" \
  "$ITERS timed iterations after $WARMUP warmup, best of $REPEAT runs"
echo "# lat_ratio = ring_us / mpi_us (target <= 1.5 for small sizes); bw_ratio = ring_busbw / mpi_busbw (target >= 1.0 from 1 MiB)"
printf "%6s %12s %10s %10s %9s %11s %11s %8s %11s\n" ranks size ring_us mpi_us lat_ratio ring_busbw mpi_busbw bw_ratio memcpy_GBps
for n in $NPROCS; do
  awk -v n="$n" '
    FILENAME == ARGV[1] { mc[$1] = $2; next }
    FILENAME == ARGV[2] { mt[$1] = $2; next }
    {
      # busbw from the times (more digits than the printed columns): bytes / us / 1e3 = GB/s
      s = $1; rt = $2; f = 2 * (n - 1) / n; rb = s / rt / 1e3 * f
      has_mpi = (s in mt) && mt[s] > 0
      printf "%6d %12d %10.2f %10s %9s %11.4f %11s %8s %11s\n", n, s, rt, (has_mpi ? sprintf("%.2f", mt[s]) : "-"),
             (has_mpi ? sprintf("%.2f", rt / mt[s]) : "-"), rb, (has_mpi ? sprintf("%.4f", s / mt[s] / 1e3 * f) : "-"),
             (has_mpi ? sprintf("%.2f", mt[s] / rt) : "-"), (s in mc ? sprintf("%.2f", mc[s]) : "-")
    }' "$TMP/memcpy.txt" "$TMP/mpi_$n.txt" "$TMP/ring_$n.txt"
done
