// collbench: an nccl-tests-style benchmark of the collectives backends: one table per op with
// size, count, time, algorithm and bus bandwidth, and the max error against the exact result.
//
//   collbench --nproc 4                            4 local ranks (env bootstrap), every op
//   collbench --nproc 2 --op allreduce --min-bytes 1K --max-bytes 64M
//   srun -n 8 collbench --op allreduce             ranks from the launcher (PMIx, PMI2, Slurm env,
//   RANK=... WORLD_SIZE=... collbench              torchrun's env, ...: --bootstrap auto)
//   collbench --nproc 8 --backend nccl             NCCL on device buffers, one GPU per rank
//   collbench --nproc 2 --op reduce_scatter_blocks ZeRO's in-place pair (ring): the gradient
//   collbench --nproc 2 --op allgather_blocks      reduce-scatter and the parameter all-gather
//   srun -N4 -n8 collbench --op allreduce --allreduce both
//                                                  the ring's flat and hierarchical all-reduce,
//                                                  one table each (tools/bench/collbench_hosts.sh)
//
// Backends: ring (host buffers) or nccl (device buffers on GPU local rank mod visible GPUs, as
// the nccl communicator picks it; inputs are filled and results checked on host copies, outside
// the timed loop). A world of one runs the ring itself, nccl's single-process communicator.
//
// Per size: every rank fills its inputs with small integers, v(r, i) = (3r + i) mod 5 - 2, so the
// exact result is known for every dtype (sums of them are exact even in bf16 up to 128 ranks);
// runs the collective once and compares (max |result - exact| over elements and ranks); runs
// --warmup untimed iterations; then, after a barrier, --iters timed ones, each waited for before
// the next is issued. time = mean per iteration on each rank, the max over ranks (an allreduce
// max). An allreduce runs its timed iterations on a zeroed buffer (a fixed point of every op, so
// repeated in-place sums neither overflow nor change the work).
//
// Columns (bytes as in nccl-tests: allreduce and broadcast the buffer; allgather the gathered
// output, reduce_scatter the scattered input, both total over ranks; the blocks pair the whole
// in-place buffer, cut into ring blocks: communicator.h):
//   algbw = size / time;  busbw = algbw * 2(n-1)/n (allreduce), algbw * (n-1)/n (allgather,
//   reduce_scatter and the blocks pair), algbw (broadcast): the per-link bandwidth the algorithm
//   needs. reduce_scatter_blocks times its iterations on a zeroed buffer, as allreduce;
//   allgather_blocks repeats on its own result (a fixed point). "--op all" runs the blocks pair on
//   the ring only (the nccl backend has no in-place pair).
//
// Exit status: 0 when every max error is within the dtype's tolerance, 1 otherwise or on a
// collective error, 2 on a usage error.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "collectives/bootstrap/factory.h"
#include "collectives/communicator.h"
#include "collectives/make_communicator.h"
#include "collectives/ring/algorithms.h"
#include "collectives/ring/ring_communicator.h"
#include "base/half.h"
#include "launch/local_launcher.h"
#include "runtime/cuda/device_choice.h"
#include "runtime/device_memory.h"
#include "base/dtype.h"
#include "base/error.h"
#include "runtime/tensor.h"
#include "runtime/tunables.h"

namespace {

using namespace dp;
namespace cpu = dp::kernels::cpu;

// The blocks pair: Communicator::reduce_scatter_blocks_async / allgather_blocks_async, in place
// (ZeRO's gradient reduce-scatter and parameter all-gather).
enum class Op { AllReduce, Broadcast, AllGather, ReduceScatter, ReduceScatterBlocks, AllGatherBlocks };
const char* op_name(Op op) {
  switch (op) {
    case Op::AllReduce: return "allreduce";
    case Op::Broadcast: return "broadcast";
    case Op::AllGather: return "allgather";
    case Op::ReduceScatter: return "reduce_scatter";
    case Op::ReduceScatterBlocks: return "reduce_scatter_blocks";
    default: return "allgather_blocks";
  }
}
bool reduces(Op op) { return op == Op::AllReduce || op == Op::ReduceScatter || op == Op::ReduceScatterBlocks; }

// "4", "4K", "256M", "1G" (binary multiples, as nccl-tests); UserError otherwise.
size_t parse_bytes(const std::string& s) {
  if (s.empty()) DP_THROW_USER("empty size");
  size_t pos = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(s, &pos);
  } catch (const std::exception&) {
    DP_THROW_USER("size '{}' is not a number of bytes (e.g. 4, 64K, 256M, 1G)", s);
  }
  std::string suffix = s.substr(pos);
  if (!suffix.empty() && (suffix.back() == 'B' || suffix.back() == 'b')) suffix.pop_back();
  if (suffix == "i" || (suffix.size() == 2 && suffix[1] == 'i')) suffix = suffix.substr(0, suffix.size() - 1);
  unsigned long long mul = 1;
  if (suffix.empty()) mul = 1;
  else if (suffix == "K" || suffix == "k") mul = 1ull << 10;
  else if (suffix == "M" || suffix == "m") mul = 1ull << 20;
  else if (suffix == "G" || suffix == "g") mul = 1ull << 30;
  else DP_THROW_USER("size '{}' has an unknown suffix (use K, M or G)", s);
  return static_cast<size_t>(v * mul);
}

ReduceOp parse_redop(const std::string& s) {
  if (s == "sum") return ReduceOp::Sum;
  if (s == "avg") return ReduceOp::Avg;
  if (s == "max") return ReduceOp::Max;
  if (s == "min") return ReduceOp::Min;
  DP_THROW_USER("unknown reduction '{}' (sum, avg, max, min)", s);
}

// Largest |result - exact| accepted (inputs are small integers; only avg's division rounds).
double tolerance(DType t) {
  switch (t) {
    case DType::F64: return 1e-12;
    case DType::F32: return 1e-5;
    case DType::F16: return 2e-3;
    case DType::BF16: return 1.6e-2;
    default: return 0;
  }
}

// The input pattern: v(r, i) = (3r + i) mod 5 - 2, in [-2, 2]; depends on i mod 5 only.
inline int pattern(int r, int64_t i) { return static_cast<int>((3 * static_cast<int64_t>(r) + i) % 5) - 2; }

// Element i = v[i mod 5] (small integers: exact in every dtype).
void fill5(const Tensor& t, const int (&v)[5]) {
  const int64_t n = t.numel();
  void* p = t.raw();
  switch (t.dtype()) {
    case DType::F32: {
      auto* d = static_cast<float*>(p);
      for (int64_t i = 0; i < n; ++i) d[i] = static_cast<float>(v[i % 5]);
      break;
    }
    case DType::F64: {
      auto* d = static_cast<double*>(p);
      for (int64_t i = 0; i < n; ++i) d[i] = v[i % 5];
      break;
    }
    case DType::I32: {
      auto* d = static_cast<int32_t*>(p);
      for (int64_t i = 0; i < n; ++i) d[i] = v[i % 5];
      break;
    }
    case DType::F16:
    case DType::BF16: {
      uint16_t v5[5];  // the five values, converted once
      for (int k = 0; k < 5; ++k) {
        const float f = static_cast<float>(v[k]);
        v5[k] = t.dtype() == DType::F16 ? cpu::f32_to_f16(f) : cpu::f32_to_bf16(f);
      }
      auto* d = static_cast<uint16_t*>(p);
      for (int64_t i = 0; i < n; ++i) d[i] = v5[i % 5];
      break;
    }
    default: DP_THROW_USER("dtype {} is not supported by the collectives", dtype_name(t.dtype()));
  }
}

// Rank r's input: v(r, i).
void fill(const Tensor& t, int r) {
  int v[5];
  for (int k = 0; k < 5; ++k) v[k] = pattern(r, k);
  fill5(t, v);
}

double element(const Tensor& t, int64_t i) {
  const void* p = t.raw();
  switch (t.dtype()) {
    case DType::F32: return static_cast<const float*>(p)[i];
    case DType::F64: return static_cast<const double*>(p)[i];
    case DType::I32: return static_cast<const int32_t*>(p)[i];
    case DType::F16: return cpu::f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::BF16: return cpu::bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    default: return NAN;
  }
}

// max |t[i] - expected(offset + i)| where expected depends on (offset + i) mod period only.
double max_error(const Tensor& t, const std::vector<double>& expected_by_residue, int64_t offset = 0) {
  const int64_t n = t.numel(), period = static_cast<int64_t>(expected_by_residue.size());
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = std::fabs(element(t, i) - expected_by_residue[(offset + i) % period]);
    if (!(d <= worst)) worst = d;  // NaN sticks
  }
  return worst;
}

// The exact reduction over ranks of v(r, k) for k = 0..4 (then element i's is [i mod 5]).
std::vector<double> reduced_pattern(int world, ReduceOp op, DType dtype) {
  std::vector<double> out(5);
  for (int k = 0; k < 5; ++k) {
    double sum = 0, mx = -1e300, mn = 1e300;
    for (int r = 0; r < world; ++r) {
      const double v = pattern(r, k);
      sum += v;
      mx = std::max(mx, v);
      mn = std::min(mn, v);
    }
    switch (op) {
      case ReduceOp::Sum: out[k] = sum; break;
      case ReduceOp::Max: out[k] = mx; break;
      case ReduceOp::Min: out[k] = mn; break;
      case ReduceOp::Avg: out[k] = dtype == DType::I32 ? std::trunc(sum / world) : sum / world; break;
    }
  }
  return out;
}

std::vector<double> rank_pattern(int r) {
  std::vector<double> out(5);
  for (int k = 0; k < 5; ++k) out[k] = pattern(r, k);
  return out;
}

struct Settings {
  std::vector<Op> ops;
  CollectiveBackend backend = CollectiveBackend::Ring;
  std::string bootstrap = "auto";
  DType dtype = DType::F32;
  ReduceOp redop = ReduceOp::Sum;
  size_t min_bytes = 4, max_bytes = 256 << 20;
  double factor = 2;
  int iters = 20, warmup = 5, root = 0;
  double timeout_s = 60;
  Device device = Device::cpu();  // where the buffers live: the backend's side
  // The ring's all-reduce: "auto" (hierarchical when the topology calls for it: the
  // DPTRAIN_RING_HIERARCHICAL default), "flat", "hierarchical", or "both" (a table each).
  std::string allreduce = "auto";
};

// `t` on the host: itself, or a copy of a device tensor.
Tensor on_host(const Tensor& t) {
  if (t.device().is_cpu()) return t;
  Tensor h = Tensor::zeros(t.shape(), t.dtype());
  h.copy_from(t);
  return h;
}

// One f64 max over ranks (on the backend's device).
double max_over_ranks(Communicator& comm, double v, Device device) {
  Tensor h = Tensor::zeros({1}, DType::F64);
  h.data<double>()[0] = v;
  Tensor t = h;
  if (!device.is_cpu()) {
    t = Tensor::zeros({1}, DType::F64, device);
    t.copy_from(h);
  }
  comm.allreduce(t, ReduceOp::Max);
  return on_host(t).data<double>()[0];
}

std::string hostname() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

using Clock = std::chrono::steady_clock;

// The buffers of one size: `a` (the input, or in-place buffer) and `out` (allgather's and
// reduce_scatter's output); count: elements of the buffer the size column describes.
struct OpBuffers {
  Tensor a, out;
  int64_t count = 0;
};

OpBuffers op_buffers(Op op, int64_t per_rank, int n, const Settings& s) {
  OpBuffers b{Tensor::zeros({per_rank}, s.dtype, s.device), Tensor(), per_rank};
  if (op == Op::AllGather) {
    b.out = Tensor::zeros({per_rank * n}, s.dtype, s.device);
    b.count = per_rank * n;
  } else if (op == Op::ReduceScatter) {
    b.a = Tensor::zeros({per_rank * n}, s.dtype, s.device);
    b.out = Tensor::zeros({per_rank}, s.dtype, s.device);
    b.count = per_rank * n;
  }
  return b;
}

void run_op(Communicator& comm, const Settings& s, Op op, OpBuffers& b) {
  switch (op) {
    case Op::AllReduce: comm.allreduce(b.a, s.redop); break;
    case Op::Broadcast: comm.broadcast(b.a, s.root); break;
    case Op::AllGather: comm.allgather(b.a, b.out); break;
    case Op::ReduceScatter: comm.reduce_scatter(b.a, b.out, s.redop); break;
    case Op::ReduceScatterBlocks: comm.reduce_scatter_blocks_async(b.a, s.redop)->wait(); break;
    case Op::AllGatherBlocks: comm.allgather_blocks_async(b.a)->wait(); break;
  }
}

// Correctness: one run on each rank's pattern; the largest error over ranks (inf for a NaN).
double op_error(Communicator& comm, const Settings& s, Op op, OpBuffers& b, int64_t per_rank,
                const std::vector<double>& reduced) {
  const int n = comm.size(), me = comm.rank();
  if (op == Op::AllGatherBlocks) {
    // Block r holds rank r's pattern at its own offsets on rank r, and 9 (no pattern value) elsewhere.
    const ring::Block mine = ring::ring_block(b.a.numel(), n, me);
    Tensor whole = Tensor::zeros(b.a.shape(), b.a.dtype());
    fill(whole, me);
    fill5(b.a, {9, 9, 9, 9, 9});
    if (mine.len > 0) b.a.slice_flat(mine.begin, {mine.len}).copy_from(whole.slice_flat(mine.begin, {mine.len}));
  } else if (s.device.is_cpu()) {
    fill(b.a, me);
  } else {
    Tensor h = Tensor::zeros(b.a.shape(), b.a.dtype());
    fill(h, me);
    b.a.copy_from(h);
  }
  run_op(comm, s, op, b);
  double err = 0;
  switch (op) {
    case Op::AllReduce: err = max_error(on_host(b.a), reduced); break;
    case Op::Broadcast: err = max_error(on_host(b.a), rank_pattern(s.root)); break;
    case Op::AllGather: {
      const Tensor h = on_host(b.out);
      for (int r = 0; r < n; ++r) err = std::max(err, max_error(h.slice_flat(r * per_rank, {per_rank}), rank_pattern(r)));
      break;
    }
    case Op::ReduceScatter: err = max_error(on_host(b.out), reduced, static_cast<int64_t>(me) * per_rank); break;
    case Op::ReduceScatterBlocks: {
      const ring::Block mine = ring::ring_block(b.a.numel(), n, me);
      if (mine.len > 0) err = max_error(b.a.slice_flat(mine.begin, {mine.len}), reduced, mine.begin);
      break;
    }
    case Op::AllGatherBlocks: {
      for (int r = 0; r < n; ++r) {
        const ring::Block blk = ring::ring_block(b.a.numel(), n, r);
        if (blk.len > 0) err = std::max(err, max_error(b.a.slice_flat(blk.begin, {blk.len}), rank_pattern(r), blk.begin));
      }
      break;
    }
  }
  if (std::isnan(err)) err = INFINITY;
  return max_over_ranks(comm, err, s.device);
}

// Timing: warm-up runs, a barrier, then the mean time of s.iters runs, the slowest rank's.
double op_seconds(Communicator& comm, const Settings& s, Op op, OpBuffers& b) {
  if (op == Op::AllReduce || op == Op::ReduceScatterBlocks) b.a.zero_();
  for (int i = 0; i < s.warmup; ++i) run_op(comm, s, op, b);
  comm.barrier();
  const auto t0 = Clock::now();
  for (int i = 0; i < s.iters; ++i) run_op(comm, s, op, b);
  const double mine = std::chrono::duration<double>(Clock::now() - t0).count() / std::max(1, s.iters);
  return max_over_ranks(comm, mine, s.device);
}

void print_op_header(const Settings& s, Op op, int n) {
  std::printf("#\n# %s%s%s, dtype %s, %d ranks, %d warmup + %d timed iterations\n", op_name(op), reduces(op) ? " " : "",
              reduces(op) ? reduce_op_name(s.redop) : "", dtype_name(s.dtype), n, s.warmup, s.iters);
  if (op == Op::Broadcast) std::printf("# root %d\n", s.root);
  std::printf("# %12s %12s %6s %6s %12s %12s %12s %10s\n", "size(B)", "count", "type", "redop", "time(us)",
              "algbw(GB/s)", "busbw(GB/s)", "max_err");
  std::fflush(stdout);
}

// One op's table (printed by rank 0). Returns false when an error exceeded the tolerance.
bool bench_op(Communicator& comm, const Settings& s, Op op) {
  const int n = comm.size(), me = comm.rank();
  const size_t esize = dtype_size(s.dtype);
  double bus_factor = static_cast<double>(n - 1) / n;  // allgather, reduce_scatter, the blocks pair
  if (op == Op::AllReduce) bus_factor = 2.0 * (n - 1) / n;
  else if (op == Op::Broadcast) bus_factor = 1;
  if (me == 0) print_op_header(s, op, n);
  const std::vector<double> reduced = reduced_pattern(n, s.redop, s.dtype);
  const double tol = tolerance(s.dtype);
  bool ok = true;
  double busbw_sum = 0;
  int rows = 0;
  int64_t last_count = -1;
  for (double b = static_cast<double>(s.min_bytes); b <= static_cast<double>(s.max_bytes) * (1 + 1e-9);
       b = std::max(b * s.factor, b + 1)) {
    const size_t bytes = static_cast<size_t>(b);
    // Elements per rank (allgather's input and reduce_scatter's output: count / n).
    const int64_t per_rank =
        static_cast<int64_t>((op == Op::AllGather || op == Op::ReduceScatter) ? bytes / esize / n : bytes / esize);
    if (per_rank == 0 || per_rank == last_count) continue;
    last_count = per_rank;
    OpBuffers buf = op_buffers(op, per_rank, n, s);
    const double err = op_error(comm, s, op, buf, per_rank, reduced);
    if (!(err <= tol)) ok = false;
    const double t = op_seconds(comm, s, op, buf);
    const double size_bytes = static_cast<double>(buf.count) * esize;
    const double algbw = t > 0 ? size_bytes / t / 1e9 : 0;
    const double busbw = algbw * bus_factor;
    busbw_sum += busbw;
    ++rows;
    if (me == 0) {
      std::printf("  %12.0f %12lld %6s %6s %12.2f %12.4f %12.4f %10.3g%s\n", size_bytes,
                  static_cast<long long>(buf.count), dtype_name(s.dtype), reduces(op) ? reduce_op_name(s.redop) : "-",
                  t * 1e6, algbw, busbw, err, err <= tol ? "" : "  FAILED");
      std::fflush(stdout);
    }
  }
  if (me == 0) {
    std::printf("# %s: avg busbw %.4f GB/s over %d sizes; errors %s (tolerance %g)\n", op_name(op),
                rows ? busbw_sum / rows : 0.0, rows, ok ? "within tolerance" : "EXCEED tolerance", tol);
    std::fflush(stdout);
  }
  return ok;
}

int run_worker(Settings s) {
  auto bs = make_bootstrap(s.bootstrap, s.timeout_s);
  if (bs->rank() == 0) log_tunables();  // the DPTRAIN_RING_* variables a sweep set
  const std::vector<std::string> hosts = bs->allgather(hostname());
  int nodes = 0;
  {
    std::vector<std::string> ids = bs->allgather(std::to_string(bs->node_id()));
    nodes = static_cast<int>(std::set<std::string>(ids.begin(), ids.end()).size());
  }
  std::unique_ptr<Communicator> comm;
  if (s.backend == CollectiveBackend::Ring && s.allreduce != "auto") {
    // Flat and hierarchical on the same ranks, one communicator each (collectives/ring/algorithms.h).
    bool ok = true;
    for (const char* algo : {"flat", "hierarchical"}) {
      if (s.allreduce != "both" && s.allreduce != algo) continue;
      RingOptions o = ring_options_from_env(s.timeout_s);
      o.hierarchical = std::string(algo) == "hierarchical";
      auto c = make_ring_communicator(*bs, o);
      const bool used = o.hierarchical && nodes > 1 && nodes < c->size();
      if (c->rank() == 0)
        std::printf("# collbench: ring, %s all-reduce%s, world size %d on %d node%s, bootstrap %s\n", algo,
                    o.hierarchical && !used ? " (not used: it needs several nodes, some with several ranks)" : "",
                    c->size(), nodes, nodes == 1 ? "" : "s", bs->kind());
      for (Op op : s.ops) ok = bench_op(*c, s, op) && ok;
      c->barrier();
    }
    return ok ? 0 : 1;
  }
  if (s.backend == CollectiveBackend::Ring) {
    comm = make_ring_communicator(*bs, s.timeout_s);
  } else {
    comm = make_communicator(s.backend, *bs, s.timeout_s);  // UserError without CUDA or a GPU
    s.device = cuda::choose_local_device(cuda::DeviceRequest::Cuda, bs->local_rank(), bs->local_size(),
                                        cuda_device_count(), s.backend)
                   .device;
  }
  if (s.root >= comm->size()) DP_THROW_USER("--root {} is not a rank of {}", s.root, comm->size());
  if (comm->rank() == 0) {
    std::set<std::string> uniq(hosts.begin(), hosts.end());
    std::string host_list;
    for (const auto& h : uniq) host_list += (host_list.empty() ? "" : ",") + h;
    std::printf("# collbench: backend %s, bootstrap %s, world size %d (%d node%s, %d local ranks on rank 0's), host %s%s\n",
                comm->backend(), bs->kind(), comm->size(), nodes, nodes == 1 ? "" : "s", bs->local_size(),
                host_list.c_str(), s.device.is_cpu() ? "" : (", buffers on " + s.device.str()).c_str());
    std::printf("# sizes %zu .. %zu bytes (x%g), dtype %s\n", s.min_bytes, s.max_bytes, s.factor, dtype_name(s.dtype));
    std::fflush(stdout);
  }
  bool ok = true;
  for (Op op : s.ops) ok = bench_op(*comm, s, op) && ok;
  comm->barrier();
  if (comm->rank() == 0) {
    std::printf("# collbench: %s\n", ok ? "OK" : "FAILED: max error above the dtype's tolerance");
    std::fflush(stdout);
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"collbench: nccl-tests-style benchmark of the collectives (size, time, algbw, busbw, max error).\n"
               "  collbench --nproc 4                      4 local ranks, every op\n"
               "  srun -n 8 collbench --op allreduce       ranks from the launcher (--bootstrap auto)"};
  std::string op = "all", backend = "ring", dtype = "f32", redop = "sum", min_b = "4", max_b = "256M";
  Settings s;
  int nproc = 1;
  app.add_option("--op", op,
                 "allreduce, broadcast, allgather, reduce_scatter, reduce_scatter_blocks, allgather_blocks "
                 "(ZeRO's in-place pair, ring only) or all")
      ->check(CLI::IsMember(
          {"allreduce", "broadcast", "allgather", "reduce_scatter", "reduce_scatter_blocks", "allgather_blocks", "all"}));
  app.add_option("--backend", backend, "collectives backend")
      ->check(CLI::IsMember(enum_name_list<CollectiveBackend>()));
  app.add_option("--bootstrap", s.bootstrap, "auto, pmix, pmi2, env, slurm, single or file:///dir");
  app.add_option("--dtype", dtype, "f32, f16, bf16, f64 or i32")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "f64", "i32"}));
  app.add_option("--redop", redop, "reduction of allreduce and reduce_scatter: sum, avg, max, min")
      ->check(CLI::IsMember({"sum", "avg", "max", "min"}));
  app.add_option("--min-bytes,-b", min_b, "smallest size (bytes; K, M, G suffixes)");
  app.add_option("--max-bytes,-e", max_b, "largest size (bytes; K, M, G suffixes)");
  app.add_option("--factor,-f", s.factor, "size multiplier between rows")->check(CLI::Range(1.0001, 1e6));
  app.add_option("--iters,-n", s.iters, "timed iterations per size")->check(CLI::Range(1, 1000000));
  app.add_option("--warmup,-w", s.warmup, "untimed iterations per size")->check(CLI::Range(0, 1000000));
  app.add_option("--root", s.root, "broadcast root")->check(CLI::Range(0, 1 << 20));
  app.add_option("--timeout", s.timeout_s, "seconds without progress before a collective or the bootstrap fails")
      ->check(CLI::Range(0.1, 1e6));
  app.add_option("--nproc", nproc, "launch N local ranks (env bootstrap; output lines prefixed '[rank r] ')")
      ->check(CLI::Range(1, 1024));
  app.add_option("--allreduce", s.allreduce,
                 "ring backend: auto (the default choice), flat, hierarchical, or both (a table each)")
      ->check(CLI::IsMember({"auto", "flat", "hierarchical", "both"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    s.backend = parse_collective_backend(backend);
    s.dtype = parse_dtype(dtype);
    s.redop = parse_redop(redop);
    s.min_bytes = parse_bytes(min_b);
    s.max_bytes = parse_bytes(max_b);
    if (s.min_bytes > s.max_bytes) DP_THROW_USER("--min-bytes {} is above --max-bytes {}", min_b, max_b);
    const bool ring = s.backend == CollectiveBackend::Ring;
    if (op == "all") {
      s.ops = {Op::AllReduce, Op::Broadcast, Op::AllGather, Op::ReduceScatter};
      if (ring) s.ops.insert(s.ops.end(), {Op::ReduceScatterBlocks, Op::AllGatherBlocks});
    } else if (op == "allreduce") s.ops = {Op::AllReduce};
    else if (op == "broadcast") s.ops = {Op::Broadcast};
    else if (op == "allgather") s.ops = {Op::AllGather};
    else if (op == "reduce_scatter") s.ops = {Op::ReduceScatter};
    else if (op == "reduce_scatter_blocks") s.ops = {Op::ReduceScatterBlocks};
    else s.ops = {Op::AllGatherBlocks};
    if (!ring && (s.ops.back() == Op::ReduceScatterBlocks || s.ops.back() == Op::AllGatherBlocks))
      DP_THROW_USER("--op {} runs on the ring backend only (the {} backend has no in-place blocks pair)", op, backend);
    const bool launcher = nproc > 1 && std::getenv("RANK") == nullptr;
    if (nproc > 1 && !launcher)
      std::fprintf(stderr, "collbench: --nproc %d ignored: this process is a worker already (RANK is set)\n", nproc);
    if (launcher) return dp::launch::run_local(nproc, dp::launch::worker_args_of(argc, argv));
    return run_worker(s);
  } catch (const UserError& e) {
    std::fprintf(stderr, "collbench: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "collbench: error: %s\n", e.what());
    return 1;
  }
}
