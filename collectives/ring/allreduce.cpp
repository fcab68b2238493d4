// The ring family (ring allreduce = reduce-scatter + all-gather over one streamed ring pass) and
// recursive doubling allreduce; the reduction order they follow is documented in algorithms.h.
#include "collectives/ring/algorithms.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/error.h"

namespace dp::ring {

using kernels::cpu::ReduceKind;

namespace {

// One received block of a ring pass: where it lands, and (when reducing) the local operand.
struct RingRecv {
  char* dst;
  const char* local;  // null: plain copy into dst
  int64_t count;
  bool divide;
};

// The streamed ring: send `first` (first_count elements) to the next rank, then forward, piece
// by piece, every block received from the previous rank except the last. Received pieces that
// reduce land in one scratch piece first: dst = scratch (op) local.
void ring_pass(Transport& tx, const char* first, int64_t first_count, const std::vector<RingRecv>& steps,
               DType dtype, ReduceKind kind, int divisor, size_t piece_bytes) {
  const int n = tx.size(), r = tx.rank();
  const size_t esz = dtype_size(dtype);
  const int64_t piece = std::max<int64_t>(1, static_cast<int64_t>(piece_bytes / esz));

  struct Piece {
    char* dst;
    const char* local;
    int64_t count;
    bool divide;
  };
  std::vector<Piece> pieces;
  size_t n_forward = 0;  // the pieces of every step but the last are forwarded
  int64_t largest = 0;
  for (size_t t = 0; t < steps.size(); ++t) {
    const RingRecv& st = steps[t];
    for (int64_t b = 0; b < st.count; b += piece) {
      int64_t c = std::min(piece, st.count - b);
      pieces.push_back({st.dst + b * esz, st.local ? st.local + b * esz : nullptr, c, st.divide});
      largest = std::max(largest, c);
    }
    if (t + 2 == steps.size()) n_forward = pieces.size();
  }
  // Received pieces that reduce land here first; they are received and reduced one at a time.
  char* scratch = tx.scratch(0, static_cast<size_t>(std::max<int64_t>(largest, 1)) * esz);

  std::vector<SendStream> sends(1);
  std::vector<RecvStream> recvs(1);
  SendStream& s = sends[0];
  RecvStream& rv = recvs[0];
  s.peer = mod(r + 1, n);
  rv.peer = mod(r - 1, n);
  for (int64_t b = 0; b < first_count; b += piece)
    s.regions.push_back({const_cast<char*>(first) + b * esz, static_cast<size_t>(std::min(piece, first_count - b)) * esz});
  const size_t first_pieces = s.regions.size();
  for (size_t i = 0; i < n_forward; ++i)
    s.regions.push_back({pieces[i].dst, static_cast<size_t>(pieces[i].count) * esz});
  s.ready = first_pieces;
  for (const Piece& p : pieces)
    rv.regions.push_back({p.local ? scratch : p.dst, static_cast<size_t>(p.count) * esz});
  // Over TCP a reducing piece lands in the scratch piece and is reduced when complete; over
  // shared memory it is reduced straight out of the peer's FIFO as it arrives (consume).
  const bool from_fifo = tx.shm_link(rv.peer);
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
  rv.on_region = [&](size_t i) {
    const Piece& p = pieces[i];
    if (p.local && !from_fifo) kernels::cpu::reduce(dtype, kind, p.dst, scratch, p.local, p.count);
    if (p.divide) kernels::cpu::divide(dtype, p.dst, p.count, divisor);
    if (i < n_forward) s.ready = first_pieces + i + 1;
  };
  tx.run(sends, recvs, 0);
}

}  // namespace

void ring_allreduce(Transport& tx, char* buf, int64_t count, DType dtype, ReduceKind kind, int divisor,
                    size_t piece_bytes) {
  const int n = tx.size(), r = tx.rank();
  const size_t esz = dtype_size(dtype);
  auto at = [&](int block) { return buf + ring_block(count, n, block).begin * esz; };
  auto len = [&](int block) { return ring_block(count, n, block).len; };
  std::vector<RingRecv> steps;
  // reduce-scatter: step t receives block r-t-2 and reduces it; the last (t = n-2) is block r.
  for (int t = 0; t < n - 1; ++t) {
    int b = mod(r - t - 2, n);
    steps.push_back({at(b), at(b), len(b), divisor > 0 && t == n - 2});
  }
  // all-gather: step j receives block r-j-1, already final.
  for (int j = 0; j < n - 1; ++j) {
    int b = mod(r - j - 1, n);
    steps.push_back({at(b), nullptr, len(b), false});
  }
  int first = mod(r - 1, n);
  ring_pass(tx, at(first), len(first), steps, dtype, kind, divisor, piece_bytes);
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
  ring_pass(tx, in + mod(r - 1, n) * bytes, block_count, steps, dtype, kind, divisor, piece_bytes);
}

void ring_allgather(Transport& tx, const char* in, char* out, int64_t block_count, DType dtype,
                    size_t piece_bytes) {
  const int n = tx.size(), r = tx.rank();
  const size_t bytes = static_cast<size_t>(block_count) * dtype_size(dtype);
  if (out + r * bytes != in) std::memcpy(out + r * bytes, in, bytes);
  std::vector<RingRecv> steps;
  for (int j = 0; j < n - 1; ++j) steps.push_back({out + mod(r - j - 1, n) * bytes, nullptr, block_count, false});
  ring_pass(tx, out + r * bytes, block_count, steps, dtype, ReduceKind::Sum, 0, piece_bytes);
}

void recursive_doubling_allreduce(Transport& tx, char* buf, int64_t count, DType dtype, ReduceKind kind,
                                  int divisor) {
  const int n = tx.size(), r = tx.rank();
  const size_t bytes = static_cast<size_t>(count) * dtype_size(dtype);
  const int p2 = lower_power_of_two(n), extra = n - p2;
  char* other = tx.scratch(0, std::max<size_t>(bytes, 1));
  constexpr uint32_t kFold = 0, kUnfold = 1000;
  if (r >= p2) {  // folded: hand the value to r - p2, get the result back
    tx.sendrecv(r - p2, buf, bytes, -1, nullptr, 0, kFold);
    tx.sendrecv(-1, nullptr, 0, r - p2, buf, bytes, kUnfold);
    return;
  }
  if (r < extra) {
    tx.sendrecv(-1, nullptr, 0, r + p2, other, bytes, kFold);
    kernels::cpu::reduce(dtype, kind, buf, buf, other, count);  // v[r] = x[r] (op) x[r+p2]
  }
  for (int k = 0, dist = 1; dist < p2; ++k, dist *= 2) {
    const int partner = r ^ dist;
    tx.sendrecv(partner, buf, bytes, partner, other, bytes, 1 + k);
    if (r < partner) kernels::cpu::reduce(dtype, kind, buf, buf, other, count);
    else kernels::cpu::reduce(dtype, kind, buf, other, buf, count);
  }
  if (divisor > 0) kernels::cpu::divide(dtype, buf, count, divisor);
  if (r < extra) tx.sendrecv(r + p2, buf, bytes, -1, nullptr, 0, kUnfold);
}

}  // namespace dp::ring
