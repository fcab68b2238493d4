#include "collectives/nccl/nccl_communicator.h"
#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "collectives/nccl/gpu_assignment.h"
#include "collectives/ring/algorithms.h"
#include "runtime/cuda/device_choice.h"
#include "runtime/cuda/stream.h"
#include "runtime/cuda/check.h"
#include "runtime/device_memory.h"
#include "runtime/log.h"

namespace dp {
namespace {

using Clock = std::chrono::steady_clock;

// How often the watcher looks at the oldest collective in flight (event + async error).
constexpr auto kPollInterval = std::chrono::microseconds(50);

// Streams and events: the runtime's owners (runtime/cuda/stream.h).

// Owns an ncclComm_t. The owner ends it with finalize() (clean: every collective done) or
// abort(); a communicator still held at destruction is aborted (never blocks, never throws).
class NcclComm {
 public:
  NcclComm() = default;
  ~NcclComm() { abort(); }
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;
  ncclComm_t get() const { return c_; }
  ncclComm_t* out() { return &c_; }
  void abort() noexcept {
    if (!c_) return;
    const ncclResult_t r = ncclCommAbort(c_);
    if (r != ncclSuccess) log::get("coll")->error("nccl: ncclCommAbort: {}", ncclGetErrorString(r));
    c_ = nullptr;
  }
  // ncclCommFinalize (polled, bounded by deadline) then ncclCommDestroy; aborts when finalizing
  // fails or takes too long.
  void finalize(Clock::time_point deadline) noexcept {
    if (!c_) return;
    ncclResult_t r = ncclCommFinalize(c_);
    ncclResult_t st = r;
    while (st == ncclInProgress && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (ncclCommGetAsyncError(c_, &st) != ncclSuccess) break;
    }
    if (st != ncclSuccess) {
      log::get("coll")->warn("nccl: ncclCommFinalize did not finish cleanly ({}); aborting the communicator",
                             ncclGetErrorString(st));
      abort();
      return;
    }
    if ((r = ncclCommDestroy(c_)) != ncclSuccess)
      log::get("coll")->error("nccl: ncclCommDestroy: {}", ncclGetErrorString(r));
    c_ = nullptr;
  }

 private:
  ncclComm_t c_ = nullptr;
};

ncclDataType_t nccl_type(DType d) {
  switch (d) {
    case DType::F32: return ncclFloat32;
    case DType::F16: return ncclFloat16;
    case DType::BF16: return ncclBfloat16;
    case DType::F64: return ncclFloat64;
    case DType::I32: return ncclInt32;
    default: break;
  }
  DP_CHECK(false, "nccl: no NCCL type for {}", dtype_name(d));
  return ncclFloat32;
}

// Avg is NCCL's own ncclAvg (sum, then divide by the rank count; integers truncate).
ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
  }
  return ncclSum;
}

// One NCCL group of call(owner, block) over the non-empty blocks of n elements cut as the ring
// cuts them; the group is always closed. The first failure of a call, else the group's result.
ncclResult_t per_block(int64_t n, int world, const std::function<ncclResult_t(int, const ring::Block&)>& call) {
  ncclResult_t first = ncclGroupStart();
  if (first != ncclSuccess) return first;
  for (int owner = 0; owner < world; ++owner) {
    const ring::Block b = ring::ring_block(n, world, owner);
    if (b.len == 0) continue;
    const ncclResult_t r = call(owner, b);
    if (first == ncclSuccess) first = r == ncclInProgress ? ncclSuccess : r;
  }
  const ncclResult_t end = ncclGroupEnd();
  return first != ncclSuccess ? first : end;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

// This rank's GPU, or an identity with visible = 0 when it has none.
nccl::GpuIdentity identify(int device, int visible) {
  nccl::GpuIdentity g;
  g.host = host_name();
  g.device = device;
  g.visible = visible;
  if (visible <= 0 || device < 0 || device >= visible) return g;
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
  const auto* u = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
  g.uuid = "GPU-";
  for (int i = 0; i < 16; ++i) g.uuid += fmt::format("{}{:02x}", i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "", u[i]);
  char bus[32] = {};
  CHECK_CUDA(cudaDeviceGetPCIBusId(bus, sizeof bus, device));
  g.pci_bus_id = bus;
  return g;
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Bootstrap& bs, double timeout_s, int device)
      : rank_(bs.rank()), size_(bs.size()), timeout_s_(timeout_s) {
    // 1. Every rank's GPU, checked on every rank before NCCL is called: all fail alike.
    const int visible = cuda_device_count();
    // By default the trainer's rule (runtime/cuda/device_choice.h); no GPU at all is reported by
    // gpu_assignment_error below, on every rank.
    const Device chosen =
        cuda::choose_local_device(cuda::DeviceRequest::Auto, bs.local_rank(), bs.local_size(), visible, CollectiveBackend::Nccl).device;
    device_ = device >= 0 ? device : chosen.is_cuda() ? chosen.index : 0;
    const auto blobs = bs.allgather(nccl::encode_gpu_identity(identify(device_, visible)));
    std::vector<nccl::GpuIdentity> gpus;
    for (size_t r = 0; r < blobs.size(); ++r) {
      auto g = nccl::parse_gpu_identity(blobs[r]);
      DP_CHECK(g.has_value(), "nccl setup: rank {} sent a malformed GPU identity (mixed builds?)", r);
      gpus.push_back(*g);
    }
    if (std::string e = nccl::gpu_assignment_error(gpus); !e.empty())
      throw UserError(fmt::format("{} [{}]", e, identity_string()));

    // 2. The unique id from rank 0, through the bootstrap; a non-blocking join, bounded.
    ncclUniqueId id{};
    if (rank_ == 0) CHECK_NCCL(ncclGetUniqueId(&id));
    const std::string got =
        bs.broadcast(rank_ == 0 ? std::string(reinterpret_cast<const char*>(&id), sizeof id) : std::string(), 0);
    DP_CHECK(got.size() == sizeof id, "nccl setup: the unique id from rank 0 has {} bytes, expected {}", got.size(),
             sizeof id);
    std::memcpy(&id, got.data(), sizeof id);
    stream_ = std::make_unique<cuda::CudaStream>(device_);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    CHECK_NCCL(ncclCommInitRankConfig(comm_.out(), size_, id, rank_, &config));
    if (std::string e = settle("nccl setup: ncclCommInitRankConfig",
                               "did every rank start, and can the hosts reach each other? NCCL_DEBUG=WARN says more");
        !e.empty()) {
      comm_.abort();
      throw DpError(e);
    }
    barrier_buf_ = Tensor::zeros({1}, DType::F32, Device::cuda(device_));
    order_event_ = cuda::CudaEvent(/*timing=*/false);
    watcher_ = std::thread([this] { watch(); });
    log::get("coll")->debug("nccl communicator up: {} ranks, cuda:{} ({})", size_, device_, gpus[rank_].pci_bus_id);
  }

  ~NcclCommunicator() override {
    bool in_flight;
    {
      std::lock_guard lock(mu_);
      stop_ = true;
      in_flight = !pending_.empty();
      if (in_flight) break_locked(0, fmt::format("rank {} destroyed its communicator with collectives in flight", rank_));
    }
    cv_.notify_all();
    watcher_.join();
    std::lock_guard lock(mu_);
    if (broken_.empty())
      comm_.finalize(Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s_)));
    comm_.abort();  // no-op after a clean finalize
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "nccl"; }

  WorkPtr allreduce_async(const Tensor& t, ReduceOp op) override {
    check_collective_dtype(t, "nccl allreduce");
    if (t.device().is_cpu()) return via_device(t, [&](const Tensor& d) { return allreduce_async(d, op); });
    check_device(t, "nccl allreduce");
    return issue("allreduce", t.dtype(), t.numel(), reduce_op_name(op), -1, [t, op](ncclComm_t c, cudaStream_t s) {
                   return ncclAllReduce(t.raw(), t.raw(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()),
                                        nccl_op(op), c, s);
                 });
  }

  // The reducer's form: after the work already on `stream` (an event joins them), no host wait.
  WorkPtr allreduce_stream_async(const Tensor& t, ReduceOp op, void* stream) override {
    check_collective_dtype(t, "nccl allreduce");
    check_device(t, "nccl allreduce");
    return issue("allreduce", t.dtype(), t.numel(), reduce_op_name(op), -1,
                 [t, op](ncclComm_t c, cudaStream_t s) {
                   return ncclAllReduce(t.raw(), t.raw(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()),
                                        nccl_op(op), c, s);
                 },
                 static_cast<cudaStream_t>(stream));
  }

  bool device_native() const override { return true; }

  // An event recorded on our stream after every collective issued so far; `stream` waits for it.
  void stream_wait_collectives(void* stream) override {
    std::lock_guard lock(mu_);
    CHECK_CUDA(cudaSetDevice(device_));
    CHECK_CUDA(cudaEventRecord(order_event_.get(), stream_->get()));
    CHECK_CUDA(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), order_event_.get(), 0));
  }

  WorkPtr broadcast_async(const Tensor& t, int root) override {
    check_collective_dtype(t, "nccl broadcast");
    if (t.device().is_cpu()) return via_device(t, [&](const Tensor& d) { return broadcast_async(d, root); });
    check_device(t, "nccl broadcast");
    DP_CHECK(root >= 0 && root < size_, "nccl broadcast: root {} is not a rank of a world of {}", root, size_);
    return issue("broadcast", t.dtype(), t.numel(), nullptr, root, [t, root](ncclComm_t c, cudaStream_t s) {
                   return ncclBroadcast(t.raw(), t.raw(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()), root,
                                        c, s);
                 });
  }

  WorkPtr allgather_async(const Tensor& in, const Tensor& out) override {
    check_allgather_shapes(in, out, size_, "nccl allgather");
    check_device(in, "nccl allgather");
    check_device(out, "nccl allgather");
    return issue("allgather", in.dtype(), out.numel(), nullptr, -1, [in, out](ncclComm_t c, cudaStream_t s) {
                   return ncclAllGather(in.raw(), out.raw(), static_cast<size_t>(in.numel()), nccl_type(in.dtype()), c,
                                        s);
                 });
  }

  WorkPtr reduce_scatter_async(const Tensor& in, const Tensor& out, ReduceOp op) override {
    check_reduce_scatter_shapes(in, out, size_, "nccl reduce_scatter");
    check_device(in, "nccl reduce_scatter");
    check_device(out, "nccl reduce_scatter");
    return issue("reduce_scatter", in.dtype(), in.numel(), reduce_op_name(op), -1, [in, out, op](ncclComm_t c, cudaStream_t s) {
          return ncclReduceScatter(in.raw(), out.raw(), static_cast<size_t>(out.numel()), nccl_type(in.dtype()),
                                   nccl_op(op), c, s);
        });
  }

  // ZeRO's pair, in place on a device tensor cut into blocks as the ring cuts it (ring_block).
  // Equal blocks (ZeRO pads its arena to a multiple of the world) are one ncclReduceScatter or
  // ncclAllGather in NCCL's in-place form (block rank() of the buffer is the receive, resp. send,
  // buffer); unequal ones one group of an ncclReduce or ncclBroadcast per block, rooted at the
  // block's owner. NCCL picks its own summation order: block rank() holds a sum of the same
  // values as allreduce_async's, not necessarily its bits (with two ranks, the same bits).
  WorkPtr reduce_scatter_blocks_async(const Tensor& t, ReduceOp op) override {
    return reduce_scatter_blocks_impl(t, op, cudaStreamPerThread);
  }
  // The Reducer's form under ZeRO: after the work already on `stream`, no host wait.
  WorkPtr reduce_scatter_blocks_stream_async(const Tensor& t, ReduceOp op, void* stream) override {
    return reduce_scatter_blocks_impl(t, op, static_cast<cudaStream_t>(stream));
  }
  WorkPtr reduce_scatter_blocks_impl(const Tensor& t, ReduceOp op, cudaStream_t after) {
    check_collective_dtype(t, "nccl reduce_scatter_blocks");
    check_device(t, "nccl reduce_scatter_blocks");
    const int rank = rank_, world = size_;
    return issue("reduce_scatter_blocks", t.dtype(), t.numel(), reduce_op_name(op), -1,
                 [t, op, rank, world](ncclComm_t c, cudaStream_t s) {
                   char* const base = static_cast<char*>(t.raw());
                   const size_t esz = dtype_size(t.dtype());
                   const ncclDataType_t type = nccl_type(t.dtype());
                   if (t.numel() % world == 0) {
                     const size_t block = static_cast<size_t>(t.numel() / world);
                     return ncclReduceScatter(base, base + rank * block * esz, block, type, nccl_op(op), c, s);
                   }
                   return per_block(t.numel(), world, [&](int owner, const ring::Block& b) {
                     char* const at = base + static_cast<size_t>(b.begin) * esz;
                     return ncclReduce(at, at, static_cast<size_t>(b.len), type, nccl_op(op), owner, c, s);
                   });
                 },
                 after);
  }

  WorkPtr allgather_blocks_async(const Tensor& t) override {
    check_collective_dtype(t, "nccl allgather_blocks");
    check_device(t, "nccl allgather_blocks");
    const int rank = rank_, world = size_;
    return issue("allgather_blocks", t.dtype(), t.numel(), nullptr, -1,
                 [t, rank, world](ncclComm_t c, cudaStream_t s) {
                   char* const base = static_cast<char*>(t.raw());
                   const size_t esz = dtype_size(t.dtype());
                   const ncclDataType_t type = nccl_type(t.dtype());
                   if (t.numel() % world == 0) {
                     const size_t block = static_cast<size_t>(t.numel() / world);
                     return ncclAllGather(base + rank * block * esz, base, block, type, c, s);
                   }
                   return per_block(t.numel(), world, [&](int owner, const ring::Block& b) {
                     char* const at = base + static_cast<size_t>(b.begin) * esz;
                     return ncclBroadcast(at, at, static_cast<size_t>(b.len), type, owner, c, s);
                   });
                 });
  }

  // A one-element allreduce: NCCL has no barrier, and this one is ordered like the rest.
  WorkPtr barrier_async() override {
    const Tensor b = barrier_buf_;
    return issue("barrier", DType::F32, 0, nullptr, -1, [b](ncclComm_t c, cudaStream_t s) {
      return ncclAllReduce(b.raw(), b.raw(), 1, ncclFloat32, ncclSum, c, s);
    });
  }

  void abort(const std::string& reason) override {
    std::lock_guard lock(mu_);
    break_locked(0, fmt::format("rank {} aborted the communicator: {}", rank_,
                                 reason.empty() ? "abort() called" : reason));
  }

 private:
  struct Pending {
    WorkPtr work;
    cuda::CudaEvent done;
  };

  // Host tensors of allreduce and broadcast (the trainer's stop flag, evaluation sums: a few
  // values) go through a device copy: the call blocks, and the Work it returns is complete.
  // The device copy lives in one buffer kept for the next call (the stop flag is all-reduced
  // every step; a device allocation synchronises the device).
  WorkPtr via_device(const Tensor& t, const std::function<WorkPtr(const Tensor&)>& issue_on_device) {
    std::lock_guard lock(stage_mu_);
    if (!stage_.defined() || stage_.nbytes() < t.nbytes())
      stage_ = Tensor::zeros({static_cast<int64_t>(std::max<size_t>(t.nbytes(), 64))}, DType::U8, Device::cuda(device_));
    const Tensor d = Tensor::view_of(stage_.storage(), 0, t.shape(), t.dtype());
    d.copy_from(t);
    WorkPtr w = issue_on_device(d);
    w->wait();
    t.copy_from(d);
    return w;
  }

  void check_device(const Tensor& t, const std::string& what) const {
    DP_CHECK(t.device() == Device::cuda(device_),
             "{}: the nccl backend takes tensors on this rank's GPU (cuda:{}), this one is {} (use the ring backend "
             "for host tensors)",
             what, device_, t.describe());
  }

  // While NCCL says ncclInProgress (non-blocking mode), polls its state until the deadline.
  // "" when it settled on success; else the error (the caller aborts).
  std::string settle(const std::string& what, const std::string& hint) {
    const auto deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s_));
    ncclResult_t st = ncclInProgress;
    while (true) {
      const ncclResult_t r = ncclCommGetAsyncError(comm_.get(), &st);
      if (r != ncclSuccess) st = r;
      if (st != ncclInProgress) break;
      if (Clock::now() > deadline)
        return fmt::format("{} [{}] at {}:{}: not done after {} s (timeout; {}); the NCCL communicator was aborted",
                           what, identity_string(), __FILE__, __LINE__, timeout_s_, hint);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (st == ncclSuccess) return "";
    return fmt::format("{} [{}] at {}:{}: {} ({}): {}; the NCCL communicator was aborted ({})", what,
                       identity_string(), __FILE__, __LINE__, ncclGetErrorString(st), static_cast<int>(st),
                       comm_.get() ? ncclGetLastError(comm_.get()) : "", hint);
  }

  // Issues one collective on stream_, after the work already submitted to `after` (by default
  // the calling thread's per-thread default stream; the contract has the data ready anyway).
  // name "barrier": described without dtype and count, like the ring's.
  WorkPtr issue(const char* name, DType dtype, int64_t count, const char* op, int root,
                const std::function<ncclResult_t(ncclComm_t, cudaStream_t)>& call,
                cudaStream_t after = cudaStreamPerThread) {
    std::unique_lock lock(mu_);
    const uint64_t seq = ++seq_;
    const std::string description = std::string(name) == "barrier"
                                        ? fmt::format("nccl barrier #{}", seq)
                                        : collective_description("nccl", name, seq, dtype, count, op, root);
    auto work = std::make_shared<Work>(seq, description);
    if (!broken_.empty()) {
      work->finish(std::make_exception_ptr(DpError(fmt::format(
          "{} [{}]: not run: the communicator is broken since an earlier error: {}", description, identity_string(),
          broken_))));
      return work;
    }
    try {
      CHECK_CUDA(cudaSetDevice(device_));
      cuda::CudaEvent ready(/*timing=*/false);
      CHECK_CUDA(cudaEventRecord(ready.get(), after));
      CHECK_CUDA(cudaStreamWaitEvent(stream_->get(), ready.get(), 0));
      const ncclResult_t r = call(comm_.get(), stream_->get());
      std::string e = r == ncclSuccess ? "" : settle(description, "a peer is dead, stalled or issued another collective");
      if (r != ncclSuccess && r != ncclInProgress && e.empty())
        e = fmt::format("{} [{}] at {}:{}: {} ({}): {}; the NCCL communicator was aborted", description,
                        identity_string(), __FILE__, __LINE__, ncclGetErrorString(r), static_cast<int>(r),
                        ncclGetLastError(comm_.get()));
      if (!e.empty()) {
        fail_now(work, e);
        return work;
      }
      Pending p{work, cuda::CudaEvent(/*timing=*/false)};
      CHECK_CUDA(cudaEventRecord(p.done.get(), stream_->get()));
      if (pending_.empty()) head_since_ = Clock::now();
      pending_.push_back(std::move(p));
    } catch (const std::exception& e) {
      fail_now(work, dynamic_cast<const DpError*>(&e)
                         ? std::string(e.what())
                         : fmt::format("{} [{}]: {}", description, identity_string(), e.what()));
    }
    lock.unlock();
    cv_.notify_all();
    return work;
  }

  // A collective that failed while being issued (mu_ held): it breaks the communicator.
  void fail_now(const WorkPtr& work, const std::string& error) {
    break_locked(work->seq(), error);
    work->finish(std::make_exception_ptr(DpError(error)));
  }

  // Breaks the communicator (mu_ held): aborts NCCL, fails every collective in flight. The one
  // numbered `seq` (the one that failed) gets `error` as is, the others say which one did; seq 0:
  // nobody's fault (abort(), destruction), `error` is the reason.
  void break_locked(uint64_t seq, const std::string& error) {
    if (!broken_.empty()) return;
    broken_ = error;
    comm_.abort();
    for (auto& p : pending_) {
      const std::string msg =
          p.work->seq() == seq ? error
          : seq == 0           ? fmt::format("{} [{}]: {}", p.work->description(), identity_string(), error)
                               : fmt::format("{} [{}]: not completed: the NCCL communicator was aborted because #{} "
                                             "failed: {}",
                                             p.work->description(), identity_string(), seq, error);
      p.work->finish(std::make_exception_ptr(DpError(msg)));
    }
    pending_.clear();
  }

  // The watcher: completes collectives in issue order; an asynchronous NCCL error or no
  // completion within timeout_s breaks the communicator. Never lets an exception escape.
  void watch() {
    if (cudaSetDevice(device_) != cudaSuccess) log::get("coll")->error("nccl watcher: cudaSetDevice failed");
    std::unique_lock lock(mu_);
    while (true) {
      if (pending_.empty()) {
        if (stop_) return;
        cv_.wait(lock, [&] { return stop_ || !pending_.empty(); });
        continue;
      }
      Pending& head = pending_.front();
      const cudaError_t q = cudaEventQuery(head.done.get());
      if (q == cudaSuccess) {
        WorkPtr w = std::move(head.work);
        pending_.pop_front();
        head_since_ = Clock::now();
        w->finish();
        continue;
      }
      if (q != cudaErrorNotReady) {
        cudaGetLastError();  // clear it: it is reported here, not by the next CUDA call
        break_locked(head.work->seq(), fmt::format("{} [{}] at {}:{}: CUDA error while waiting: {} ({}); the NCCL "
                                                   "communicator was aborted",
                                                   head.work->description(), identity_string(), __FILE__, __LINE__,
                                                   cudaGetErrorString(q), static_cast<int>(q)));
        continue;
      }
      ncclResult_t st = ncclSuccess;
      const ncclResult_t r = ncclCommGetAsyncError(comm_.get(), &st);
      if (r != ncclSuccess) st = r;
      if (st != ncclSuccess && st != ncclInProgress) {
        const std::string hint = nccl_hint(st);
        break_locked(head.work->seq(),
                     fmt::format("{} [{}] at {}:{}: NCCL reported an asynchronous error: {} ({}): {}; the NCCL "
                                 "communicator was aborted{}",
                                 head.work->description(), identity_string(), __FILE__, __LINE__,
                                 ncclGetErrorString(st), static_cast<int>(st), ncclGetLastError(comm_.get()),
                                 hint.empty() ? "" : "; hint: " + hint));
        continue;
      }
      const double waited = std::chrono::duration<double>(Clock::now() - head_since_).count();
      if (waited > timeout_s_) {
        break_locked(head.work->seq(),
                     fmt::format("{} [{}] at {}:{}: not completed after {:g} s (timeout: a peer is dead, stalled, or "
                                 "issued another collective); the NCCL communicator was aborted",
                                 head.work->description(), identity_string(), __FILE__, __LINE__, timeout_s_));
        continue;
      }
      lock.unlock();
      std::this_thread::sleep_for(kPollInterval);
      lock.lock();
    }
  }

  const int rank_;
  const int size_;
  const double timeout_s_;
  int device_ = 0;
  std::unique_ptr<cuda::CudaStream> stream_;
  Tensor barrier_buf_;  // (1) f32 on device_
  std::mutex stage_mu_;
  Tensor stage_;        // u8 on device_: via_device's copy of a host tensor (grows, kept)
  cuda::CudaEvent order_event_;  // stream_wait_collectives' (recorded and waited for under mu_)

  std::mutex mu_;  // guards everything below and every use of comm_ after setup
  std::condition_variable cv_;
  NcclComm comm_;
  std::deque<Pending> pending_;  // issued, not yet completed, in issue order
  Clock::time_point head_since_;  // when pending_.front() became the oldest
  uint64_t seq_ = 0;
  bool stop_ = false;
  std::string broken_;
  std::thread watcher_;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Bootstrap& bs, double timeout_s, int device) {
  DP_CHECK(timeout_s > 0, "nccl: timeout {} s must be positive", timeout_s);
  return std::make_unique<NcclCommunicator>(bs, timeout_s, device);
}

}  // namespace dp
