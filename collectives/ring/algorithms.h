// defines: the collective algorithms of the ring backend, over a Transport, on host buffers:
// allreduce.cpp (ring allreduce, reduce-scatter, all-gather, recursive doubling), broadcast.cpp,
// barrier.cpp.
//
// Reduction order (what makes results deterministic, and what the test oracle replays). Every
// combination is one kernels::cpu::reduce call, acc = acc (op) x, elementwise; 16-bit floats
// are rounded after every combination; the average divides the final sum once (on the rank that
// finishes a block in ring algorithms, on every rank after recursive doubling; same bits).
//  - ring allreduce / ring reduce_scatter: the buffer is cut into N blocks (ring_block: the
//    first count % N blocks get one extra element). Block j is reduced along the ring starting
//    at rank j+1: acc = x[j+1]; acc = acc (op) x[j+2]; ...; acc = acc (op) x[j] (ranks mod N),
//    and rank j ends up owning it. Allreduce then circulates the owned blocks (all-gather).
//  - recursive doubling allreduce: with P the largest power of two <= N, ranks r >= P first
//    fold into r - P: v[i] = x[i] (op) x[i+P] for i < N-P, v[i] = x[i] otherwise; then for
//    k = 0, 1, ... (distance 2^k) every pair combines v = v[lower rank] (op) v[higher rank];
//    the result (equal on both sides of every pair) goes back to the folded ranks.
//
// Algorithms and their costs (alpha: per-message latency, beta: per-byte time, n bytes):
//  - ring allreduce: reduce-scatter then all-gather, 2(N-1) steps of n/N bytes, streamed in
//    pieces: a piece received in step t is reduced and forwarded in step t+1 while the next
//    piece is still arriving, so the steps overlap. 2(N-1) alpha + 2 (N-1)/N n beta: bandwidth
//    optimal, for large messages (Patarasuk and Yuan, "Bandwidth optimal all-reduce algorithms
//    for clusters of workstations", JPDC 2009).
//  - recursive doubling allreduce: ceil(log2 N) (+2 when N is not a power of two) exchanges of
//    n bytes: log2(N) alpha + log2(N) n beta, for small messages (Thakur, Rabenseifner and
//    Gropp, "Optimization of collective communication operations in MPICH", IJHPCA 2005).
//  - broadcast: binomial tree (log2 N rounds of n bytes) for small messages; for large ones a
//    pipelined chain root -> root+1 -> ... that forwards each piece as it arrives.
//  - allgather / reduce_scatter: ring, N-1 steps of n/N bytes, streamed like allreduce.
//  - barrier: dissemination (Hensgen, Finkel and Manber 1988): ceil(log2 N) rounds, round k
//    signals rank r + 2^k and waits for rank r - 2^k; header-only messages.
#pragma once
#include <cstddef>
#include <cstdint>

#include "collectives/ring/transport.h"
#include "kernels/cpu/reduce.h"

namespace dp::ring {

// Elements [begin, begin + len) of block i when `count` elements are cut into n blocks.
struct Block {
  int64_t begin;
  int64_t len;
};
Block ring_block(int64_t count, int n, int i);
// The largest power of two <= n (n >= 1).
int lower_power_of_two(int n);
// a mod n in [0, n) for any sign of a: ring arithmetic on ranks.
inline int mod(int a, int n) { return ((a % n) + n) % n; }

// `divisor` > 0: divide the reduced result by it (the average); 0: do not.
void ring_allreduce(Transport& tx, char* buf, int64_t count, DType dtype, kernels::cpu::ReduceKind kind,
                    int divisor, size_t piece_bytes);
void recursive_doubling_allreduce(Transport& tx, char* buf, int64_t count, DType dtype,
                                  kernels::cpu::ReduceKind kind, int divisor);
// in: N blocks of block_count elements; out: block rank() of the reduction. in is not modified.
void ring_reduce_scatter(Transport& tx, const char* in, char* out, int64_t block_count, DType dtype,
                         kernels::cpu::ReduceKind kind, int divisor, size_t piece_bytes);
// out[r * block_count ...] = rank r's in, for every r.
void ring_allgather(Transport& tx, const char* in, char* out, int64_t block_count, DType dtype,
                    size_t piece_bytes);
void binomial_broadcast(Transport& tx, char* buf, size_t bytes, int root);
void chain_broadcast(Transport& tx, char* buf, size_t bytes, int root, size_t piece_bytes);
void dissemination_barrier(Transport& tx);

}  // namespace dp::ring
