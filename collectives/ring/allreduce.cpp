// The ring family (ring allreduce = reduce-scatter + all-gather over one streamed ring pass),
// recursive doubling allreduce, and the hierarchical allreduce built from them (a chain reduce
// within each node, the ring or recursive doubling between the nodes' leaders, a broadcast
// within each node); the reduction orders they follow are documented in algorithms.h.
#include "collectives/ring/algorithms.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/error.h"

namespace dp::ring {

using kernels::cpu::ReduceKind;

namespace {

// Step numbers in the stream headers of the hierarchical allreduce's phases (the leaders' ring
// and recursive doubling use their own: 0, 1 + k, 1000).
constexpr uint32_t kLocalReduceStep = 2000;
constexpr uint32_t kLocalBroadcastStep = 3000;

// One received block of a pass: where it lands, and (when reducing) the local operand.
struct RingRecv {
  char* dst;
  const char* local;  // null: plain copy into dst
  int64_t count;
  bool divide;
};

// The streamed pass: send `first` (first_count elements) to rank `to`, then forward, piece by
// piece, every block received from rank `from` in the first `forward_steps` steps. Received
// pieces that reduce land in one scratch piece first: dst = scratch (op) local. to / from < 0:
// no send / no receive (the ends of a chain).
void ring_pass(Transport& tx, int to, int from, const char* first, int64_t first_count,
               const std::vector<RingRecv>& steps, size_t forward_steps, DType dtype, ReduceKind kind, int divisor,
               size_t piece_bytes, uint32_t step) {
  const size_t esz = dtype_size(dtype);
  const int64_t piece = std::max<int64_t>(1, static_cast<int64_t>(piece_bytes / esz));

  struct Piece {
    char* dst;
    const char* local;
    int64_t count;
    bool divide;
  };
  std::vector<Piece> pieces;
  size_t n_forward = 0;  // the pieces of the first forward_steps steps are forwarded
  int64_t largest = 0;
  for (size_t t = 0; t < steps.size(); ++t) {
    const RingRecv& st = steps[t];
    for (int64_t b = 0; b < st.count; b += piece) {
      int64_t c = std::min(piece, st.count - b);
      pieces.push_back({st.dst + b * esz, st.local ? st.local + b * esz : nullptr, c, st.divide});
      largest = std::max(largest, c);
    }
    if (t + 1 == forward_steps) n_forward = pieces.size();
  }
  // Received pieces that reduce land here first; they are received and reduced one at a time.
  char* scratch = tx.scratch(0, static_cast<size_t>(std::max<int64_t>(largest, 1)) * esz);

  std::vector<SendStream> sends(to >= 0 ? 1 : 0);
  std::vector<RecvStream> recvs(from >= 0 ? 1 : 0);
  size_t first_pieces = 0;
  if (to >= 0) {
    SendStream& s = sends[0];
    s.peer = to;
    for (int64_t b = 0; b < first_count; b += piece)
      s.regions.push_back(
          {const_cast<char*>(first) + b * esz, static_cast<size_t>(std::min(piece, first_count - b)) * esz});
    first_pieces = s.regions.size();
    for (size_t i = 0; i < n_forward; ++i)
      s.regions.push_back({pieces[i].dst, static_cast<size_t>(pieces[i].count) * esz});
    s.ready = first_pieces;
  }
  if (from >= 0) {
    RecvStream& rv = recvs[0];
    rv.peer = from;
    for (const Piece& p : pieces)
      rv.regions.push_back({p.local ? scratch : p.dst, static_cast<size_t>(p.count) * esz});
    // Over TCP a reducing piece lands in the scratch piece and is reduced when complete; over
    // shared memory it is reduced straight out of the peer's FIFO as it arrives (consume).
    const bool from_fifo = tx.shm_link(from);
    if (from_fifo) {
      rv.unit = esz;
      rv.consume = [&](size_t i, size_t offset, const char* data, size_t bytes) {
        const Piece& p = pieces[i];
        if (p.local)
          kernels::cpu::reduce(dtype, kind, p.dst + offset, data, p.local + offset, static_cast<int64_t>(bytes / esz));
        else
          std::memcpy(p.dst + offset, data, bytes);
      };
    }
    rv.on_region = [&, from_fifo](size_t i) {
      const Piece& p = pieces[i];
      if (p.local && !from_fifo) kernels::cpu::reduce(dtype, kind, p.dst, scratch, p.local, p.count);
      if (p.divide) kernels::cpu::divide(dtype, p.dst, p.count, divisor);
      if (i < n_forward) sends[0].ready = first_pieces + i + 1;
    };
  }
  tx.run(sends, recvs, step);
}

// The blocks of an in-place ring collective over buf[0, count): block b as ring_block cuts it.
struct InPlaceBlocks {
  char* buf;
  int64_t count;
  int n;
  size_t esz;
  char* at(int b) const { return buf + ring_block(count, n, b).begin * esz; }
  int64_t len(int b) const { return ring_block(count, n, b).len; }
};

// The reduce-scatter half (ring_allreduce's first n-1 steps) for the rank at position r: step t
// receives block r-t-2 and reduces it into place; the last (t = n-2) is block r, divided when
// divide is set. What the rank sends first is block r-1.
void append_reduce_steps(std::vector<RingRecv>& steps, const InPlaceBlocks& blocks, int r, bool divide) {
  for (int t = 0; t < blocks.n - 1; ++t) {
    const int b = mod(r - t - 2, blocks.n);
    steps.push_back({blocks.at(b), blocks.at(b), blocks.len(b), divide && t == blocks.n - 2});
  }
}

// The all-gather half (ring_allreduce's last n-1 steps): step j receives block r-j-1, already
// final. Alone, what the rank sends first is its own block r.
void append_gather_steps(std::vector<RingRecv>& steps, const InPlaceBlocks& blocks, int r) {
  for (int j = 0; j < blocks.n - 1; ++j) {
    const int b = mod(r - j - 1, blocks.n);
    steps.push_back({blocks.at(b), nullptr, blocks.len(b), false});
  }
}

}  // namespace

void ring_allreduce(Transport& tx, const Group& g, char* buf, int64_t count, DType dtype, ReduceKind kind,
                    int divisor, size_t piece_bytes) {
  const int n = g.size(), r = g.me;
  const InPlaceBlocks blocks{buf, count, n, dtype_size(dtype)};
  std::vector<RingRecv> steps;
  append_reduce_steps(steps, blocks, r, divisor > 0);
  append_gather_steps(steps, blocks, r);
  const int first = mod(r - 1, n);
  ring_pass(tx, g.at(r + 1), g.at(r - 1), blocks.at(first), blocks.len(first), steps, steps.size() - 1, dtype, kind,
            divisor, piece_bytes, 0);
}

void ring_allreduce(Transport& tx, char* buf, int64_t count, DType dtype, ReduceKind kind, int divisor,
                    size_t piece_bytes) {
  ring_allreduce(tx, world_group(tx.rank(), tx.size()), buf, count, dtype, kind, divisor, piece_bytes);
}

void ring_reduce_scatter_blocks(Transport& tx, char* buf, int64_t count, DType dtype, ReduceKind kind, int divisor,
                                size_t piece_bytes) {
  const int n = tx.size(), r = tx.rank();
  const InPlaceBlocks blocks{buf, count, n, dtype_size(dtype)};
  std::vector<RingRecv> steps;
  append_reduce_steps(steps, blocks, r, divisor > 0);
  const int first = mod(r - 1, n);
  ring_pass(tx, mod(r + 1, n), mod(r - 1, n), blocks.at(first), blocks.len(first), steps, steps.size() - 1, dtype,
            kind, divisor, piece_bytes, 0);
}

void ring_allgather_blocks(Transport& tx, char* buf, int64_t count, DType dtype, size_t piece_bytes) {
  const int n = tx.size(), r = tx.rank();
  const InPlaceBlocks blocks{buf, count, n, dtype_size(dtype)};
  std::vector<RingRecv> steps;
  append_gather_steps(steps, blocks, r);
  ring_pass(tx, mod(r + 1, n), mod(r - 1, n), blocks.at(r), blocks.len(r), steps, steps.size() - 1, dtype,
            ReduceKind::Sum, 0, piece_bytes, 0);
}

void ring_reduce_scatter(Transport& tx, const char* in, char* out, int64_t block_count, DType dtype,
                         ReduceKind kind, int divisor, size_t piece_bytes) {
  const int n = tx.size(), r = tx.rank();
  const size_t bytes = static_cast<size_t>(block_count) * dtype_size(dtype);
  // Partial sums of the blocks in transit: block b received in step t (< n-2) is forwarded in
  // step t+1; each block passes through here once, so one slot per block suffices.
  char* work = tx.scratch(1, bytes * static_cast<size_t>(n));
  std::vector<RingRecv> steps;
  for (int t = 0; t < n - 1; ++t) {
    int b = mod(r - t - 2, n);
    bool last = t == n - 2;
    steps.push_back({last ? out : work + b * bytes, in + b * bytes, block_count, divisor > 0 && last});
  }
  ring_pass(tx, mod(r + 1, n), mod(r - 1, n), in + mod(r - 1, n) * bytes, block_count, steps, steps.size() - 1,
            dtype, kind, divisor, piece_bytes, 0);
}

void ring_allgather(Transport& tx, const char* in, char* out, int64_t block_count, DType dtype,
                    size_t piece_bytes) {
  const int n = tx.size(), r = tx.rank();
  const size_t bytes = static_cast<size_t>(block_count) * dtype_size(dtype);
  if (out + r * bytes != in) std::memcpy(out + r * bytes, in, bytes);
  std::vector<RingRecv> steps;
  for (int j = 0; j < n - 1; ++j) steps.push_back({out + mod(r - j - 1, n) * bytes, nullptr, block_count, false});
  ring_pass(tx, mod(r + 1, n), mod(r - 1, n), out + r * bytes, block_count, steps, steps.size() - 1, dtype,
            ReduceKind::Sum, 0, piece_bytes, 0);
}

void recursive_doubling_allreduce(Transport& tx, const Group& g, char* buf, int64_t count, DType dtype,
                                  ReduceKind kind, int divisor) {
  const int n = g.size(), r = g.me;
  const size_t bytes = static_cast<size_t>(count) * dtype_size(dtype);
  const int p2 = lower_power_of_two(n), extra = n - p2;
  char* other = tx.scratch(0, std::max<size_t>(bytes, 1));
  constexpr uint32_t kFold = 0, kUnfold = 1000;
  if (r >= p2) {  // folded: hand the value to r - p2, get the result back
    tx.sendrecv(g.at(r - p2), buf, bytes, -1, nullptr, 0, kFold);
    tx.sendrecv(-1, nullptr, 0, g.at(r - p2), buf, bytes, kUnfold);
    return;
  }
  if (r < extra) {
    tx.sendrecv(-1, nullptr, 0, g.at(r + p2), other, bytes, kFold);
    kernels::cpu::reduce(dtype, kind, buf, buf, other, count);  // v[r] = x[r] (op) x[r+p2]
  }
  for (int k = 0, dist = 1; dist < p2; ++k, dist *= 2) {
    const int partner = r ^ dist;
    tx.sendrecv(g.at(partner), buf, bytes, g.at(partner), other, bytes, 1 + k);
    if (r < partner) kernels::cpu::reduce(dtype, kind, buf, buf, other, count);
    else kernels::cpu::reduce(dtype, kind, buf, other, buf, count);
  }
  if (divisor > 0) kernels::cpu::divide(dtype, buf, count, divisor);
  if (r < extra) tx.sendrecv(g.at(r + p2), buf, bytes, -1, nullptr, 0, kUnfold);
}

void recursive_doubling_allreduce(Transport& tx, char* buf, int64_t count, DType dtype, ReduceKind kind,
                                  int divisor) {
  recursive_doubling_allreduce(tx, world_group(tx.rank(), tx.size()), buf, count, dtype, kind, divisor);
}

void chain_reduce(Transport& tx, const Group& g, char* buf, int64_t count, DType dtype, ReduceKind kind,
                  size_t piece_bytes, uint32_t step) {
  const int n = g.size(), i = g.me;
  if (n == 1 || count == 0) return;
  const int to = i > 0 ? g.at(i - 1) : -1;
  const int from = i < n - 1 ? g.at(i + 1) : -1;
  std::vector<RingRecv> steps;
  if (from >= 0) steps.push_back({buf, buf, count, false});  // buf = x[i] (op) what member i+1 holds
  // The last member sends its own values; the others forward their partial results piece by piece.
  ring_pass(tx, to, from, from >= 0 ? nullptr : buf, from >= 0 ? 0 : count, steps, to >= 0 ? steps.size() : 0,
            dtype, kind, 0, piece_bytes, step);
}

void hierarchical_allreduce(Transport& tx, const RingTopology& topo, char* buf, int64_t count, DType dtype,
                            ReduceKind kind, int divisor, size_t small_bytes, size_t piece_bytes) {
  const size_t bytes = static_cast<size_t>(count) * dtype_size(dtype);
  chain_reduce(tx, topo.local(), buf, count, dtype, kind, piece_bytes, kLocalReduceStep);
  if (topo.leader()) {
    const Group& leaders = topo.leaders();
    if (leaders.size() == 1) {
      if (divisor > 0) kernels::cpu::divide(dtype, buf, count, divisor);
    } else if (bytes <= small_bytes) {
      recursive_doubling_allreduce(tx, leaders, buf, count, dtype, kind, divisor);
    } else {
      ring_allreduce(tx, leaders, buf, count, dtype, kind, divisor, piece_bytes);
    }
  }
  if (bytes <= small_bytes) binomial_broadcast(tx, topo.local(), buf, bytes, 0, kLocalBroadcastStep);
  else chain_broadcast(tx, topo.local(), buf, bytes, 0, piece_bytes, kLocalBroadcastStep);
}

}  // namespace dp::ring
