// defines: the collective algorithms of the ring backend, over a Transport, on host buffers:
// allreduce.cpp (ring allreduce, reduce-scatter, all-gather, recursive doubling, chain reduce,
// hierarchical allreduce), broadcast.cpp, barrier.cpp.
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
//  - hierarchical allreduce (several nodes, some with several ranks; topology.h): within each
//    node of L ranks l0 < l1 < ... (l0 its leader) a chain reduce gives the node's value
//    y = x[l0] (op) (x[l1] (op) (... (op) x[l(L-1)])) (each member combines its own value with what
//    the next one hands it); the leaders then all-reduce the y's among themselves with the
//    ring or recursive doubling orders above (leader i in place of rank i, leaders in node
//    order; the average divides there, once); each leader broadcasts the result to its node.
//    Deterministic (a function of the topology, count and algorithm), identical on every rank,
//    but not the flat algorithms' order: results differ from the flat ring's by rounding only
//    (a float sum of N values either way: both lie within (N+1) eps sum|x| of the exact sum).
//    IEEE addition is commutative, so only the grouping matters, never which operand is first.
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
//  - hierarchical allreduce (NCCL's and Horovod's two-level scheme): shared memory carries the
//    chain reduce and the broadcast within a node (pipelined in pieces, n bytes each way), the
//    network only the leaders' allreduce: 2 (M-1)/M n bytes per leader for M nodes instead of
//    crossing node boundaries at 2 (N-1)/N n bytes per rank in a flat ring whose neighbours
//    alternate between shared memory and the network.
//
// Groups: the algorithms that take a Group run among its members only (the leaders, a node's
// ranks), with member indices in place of ranks; the others are the world group's.
#pragma once
#include <cstddef>
#include <cstdint>

#include "collectives/ring/topology.h"
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
void ring_allreduce(Transport& tx, const Group& g, char* buf, int64_t count, DType dtype,
                    kernels::cpu::ReduceKind kind, int divisor, size_t piece_bytes);
void recursive_doubling_allreduce(Transport& tx, char* buf, int64_t count, DType dtype,
                                  kernels::cpu::ReduceKind kind, int divisor);
void recursive_doubling_allreduce(Transport& tx, const Group& g, char* buf, int64_t count, DType dtype,
                                  kernels::cpu::ReduceKind kind, int divisor);
// Member 0 of g ends with x[g0] (op) (x[g1] (op) (...)); the other members' buffers hold partial
// results afterwards. `step` goes into the stream headers.
void chain_reduce(Transport& tx, const Group& g, char* buf, int64_t count, DType dtype,
                  kernels::cpu::ReduceKind kind, size_t piece_bytes, uint32_t step);
// Messages up to small_bytes: recursive doubling between the leaders and a binomial broadcast
// within the nodes; larger: the ring and the pipelined chain.
void hierarchical_allreduce(Transport& tx, const RingTopology& topo, char* buf, int64_t count, DType dtype,
                            kernels::cpu::ReduceKind kind, int divisor, size_t small_bytes, size_t piece_bytes);
// in: N blocks of block_count elements; out: block rank() of the reduction. in is not modified.
void ring_reduce_scatter(Transport& tx, const char* in, char* out, int64_t block_count, DType dtype,
                         kernels::cpu::ReduceKind kind, int divisor, size_t piece_bytes);
// In place on buf (count elements cut into ring_block's blocks): block rank() ends with the bits
// ring_allreduce leaves there (the same steps, pieces and operand order: its reduce-scatter
// half); the other blocks hold partial results. ZeRO's gradient reduction.
void ring_reduce_scatter_blocks(Transport& tx, char* buf, int64_t count, DType dtype, kernels::cpu::ReduceKind kind,
                                int divisor, size_t piece_bytes);
// In place: every rank's block rank() (ring_block) goes to every rank (ring_allreduce's all-gather
// half). ZeRO's parameter gather.
void ring_allgather_blocks(Transport& tx, char* buf, int64_t count, DType dtype, size_t piece_bytes);
// out[r * block_count ...] = rank r's in, for every r.
void ring_allgather(Transport& tx, const char* in, char* out, int64_t block_count, DType dtype,
                    size_t piece_bytes);
void binomial_broadcast(Transport& tx, char* buf, size_t bytes, int root);
void binomial_broadcast(Transport& tx, const Group& g, char* buf, size_t bytes, int root, uint32_t step);
void chain_broadcast(Transport& tx, char* buf, size_t bytes, int root, size_t piece_bytes);
void chain_broadcast(Transport& tx, const Group& g, char* buf, size_t bytes, int root, size_t piece_bytes,
                     uint32_t step);
void dissemination_barrier(Transport& tx);

}  // namespace dp::ring
