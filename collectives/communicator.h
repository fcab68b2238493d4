// defines: ReduceOp, Work (an asynchronous collective's handle), Communicator (the interface
// every collectives backend implements) and SingleProcessCommunicator (world size 1).
//
// Contract shared by every backend:
//  - Collectives are issued in the same order, with the same arguments (dtype, element count,
//    op, root), on every rank. Each gets the next sequence number (1, 2, ...) of its
//    communicator; errors name it ("ring allreduce #12 (f32, 1048576 elements, sum)").
//  - `*_async` returns at once; the tensors belong to the collective until its Work is done.
//    The blocking forms are `*_async(...)->wait()`.
//  - Supported dtypes: f32, f16, bf16, f64, i32. Avg is sum then divide by size() (16-bit
//    floats divide in f32; i32 truncates toward zero).
//  - A dead or stalled peer becomes a DpError naming the rank and the collective, on every
//    surviving rank, within the backend's timeout; never a hang. After an error (or abort())
//    the communicator is broken: every later collective fails at once with the first error.
//
// Device (CUDA) tensors, in every backend:
//  - Any collective accepts CUDA tensors; all tensors of one call are on the same device (the
//    ring and single backends: any device; nccl: its rank's GPU). Host and device tensors are
//    never mixed in one call.
//  - The caller makes the data ready first: when it calls (the blocking and the `*_async`
//    forms alike), the work that wrote the tensors, on any stream, has completed (e.g.
//    cudaStreamSynchronize on the stream that wrote them). allreduce_stream_async is the form
//    for data that is not ready yet: it reads the tensor as left by the work already submitted
//    to a given stream, without blocking the caller.
//  - When wait() returns (or the blocking form returns), the result is in the tensor and
//    visible to work submitted afterwards on any stream. Until then the tensors belong to the
//    collective: no stream may read or write them.
//  - How: the ring stages device tensors through pinned host memory (copy to the host on a
//    stream of its own, the ring on the host copy, copy back, synchronised before the Work
//    completes; staging buffers are reused, collectives/device_staging.h). nccl uses the device
//    pointers on its own stream; its Work completes when that stream has passed the collective.
//    nccl also takes host tensors for allreduce and broadcast (the trainer's per-step stop flag,
//    evaluation sums, start-up broadcasts of host state) through a device copy, blocking.
//    single: allreduce and broadcast of one rank leave the tensor as it is; allgather and
//    reduce_scatter copy (synchronously).
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

#include <vector>

#include "collectives/flight_recorder.h"
#include "runtime/tensor.h"

namespace dp {

enum class ReduceOp { Sum, Avg, Max, Min };

// A collective failed because of a peer or the network (a rank died, stopped answering, was cut
// off, or issued a different collective), not because of this process: the trainer exits with
// its own status for it (launch/cli.cpp), and the flight recorder has written what it knew.
class CommunicationError : public DpError {
 public:
  using DpError::DpError;
};
const char* reduce_op_name(ReduceOp op);  // "sum", "avg", "max", "min"

// The handle of one issued collective. Thread-safe; backends call finish() exactly once.
class Work {
 public:
  Work(uint64_t seq, std::string description);
  virtual ~Work() = default;
  uint64_t seq() const { return seq_; }
  // "ring allreduce #12 (f32, 1048576 elements, sum)"; formatted on first use when the backend
  // describes lazily (describe()): only errors need it, and formatting it for every collective
  // cost a tenth of a small allreduce.
  const std::string& description() const;
  // True once the collective has finished, successfully or not. Never blocks.
  bool is_completed() const;
  // Blocks until the collective has finished; rethrows its error. timeout_s >= 0 bounds the
  // wait: past it, throws DpError "<description>: not completed after <t> s (wait timeout)" and
  // the collective stays in flight (its buffers still busy; abort() the communicator to give
  // up on it). The backend's own timeout bounds every collective anyway.
  void wait(double timeout_s = -1) const;

  // Backend side: mark done; `error` null on success.
  void finish(std::exception_ptr error = nullptr);

  // When it was issued and when it finished (steady clock; finished_at is meaningful once
  // is_completed()). Backends run collectives in issue order, so a collective's time on the
  // wire is [max(issued_at, the previous one's finished_at), finished_at].
  std::chrono::steady_clock::time_point issued_at() const { return issued_at_; }
  std::chrono::steady_clock::time_point finished_at() const;

 protected:
  // For backends that describe lazily: override describe().
  explicit Work(uint64_t seq) : seq_(seq) {}
  virtual std::string describe() const { return ""; }

 private:
  const uint64_t seq_;
  mutable std::string description_;  // set once (constructor, or first description() under mu_)
  const std::chrono::steady_clock::time_point issued_at_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point finished_at_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};
using WorkPtr = std::shared_ptr<Work>;

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* backend() const = 0;  // "single", "ring", "nccl"

  // In place: t = op over ranks of t.
  virtual WorkPtr allreduce_async(const Tensor& t, ReduceOp op) = 0;
  // In place: t = root's t.
  virtual WorkPtr broadcast_async(const Tensor& t, int root) = 0;
  // out (size() * n elements) = concatenation of every rank's in (n elements) in rank order.
  virtual WorkPtr allgather_async(const Tensor& in, const Tensor& out) = 0;
  // out (n elements) = block rank() of op over ranks of in (size() * n elements).
  virtual WorkPtr reduce_scatter_async(const Tensor& in, const Tensor& out, ReduceOp op) = 0;
  virtual WorkPtr barrier_async() = 0;
  // ZeRO's pair (collectives/reducer/zero_shard.h), in place on a tensor of n elements (the ring:
  // on the CPU, or a device tensor staged as its other collectives are; nccl: on the rank's GPU) cut into size() blocks as the ring all-reduce cuts it
  // (ring_block: the first n % size() blocks one element longer). reduce_scatter_blocks: block
  // rank() ends with the op over ranks of its elements, on the ring the bits allreduce_async(t, op)
  // would leave there (the same summation order; nccl sums in its own); the other blocks are
  // left undefined.
  // allgather_blocks: every rank's block rank() goes to every rank. The defaults throw (a backend
  // without them); single leaves t as it is.
  virtual WorkPtr reduce_scatter_blocks_async(const Tensor& t, ReduceOp op);
  virtual WorkPtr allgather_blocks_async(const Tensor& t);
  // Gives up: the collective in flight and every later one fail with `reason`, here and (as
  // far as they can still be told) on every peer. Idempotent; never throws.
  virtual void abort(const std::string& reason) = 0;

  // Blocking forms: `*_async(...)->wait()` unless a backend does better (the ring runs them on
  // the calling thread when nothing else is queued: no hand-off to its worker thread and back).
  virtual void allreduce(const Tensor& t, ReduceOp op) { allreduce_async(t, op)->wait(); }
  virtual void broadcast(const Tensor& t, int root) { broadcast_async(t, root)->wait(); }
  virtual void allgather(const Tensor& in, const Tensor& out) { allgather_async(in, out)->wait(); }
  virtual void reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) {
    reduce_scatter_async(in, out, op)->wait();
  }
  virtual void barrier() { barrier_async()->wait(); }

  // Stream-ordered all-reduce of a device tensor (what the gradient reducer uses): `stream` is
  // a cudaStream_t (void* here, so that this header needs no CUDA). The collective reads t as
  // left by the work submitted to `stream` before this call, and does not block the caller on
  // it: nccl makes its stream wait for `stream` (an event); the ring issues its copy to the host
  // on `stream` and its own thread waits for that copy (an event) before reading it; single
  // does nothing. Once wait() returns, work submitted to `stream` afterwards sees the result;
  // with ring and nccl every stream does (single: the result is the input, ordered on `stream`
  // only). For nccl, stream_wait_collectives orders a stream after it without a host wait.
  // The default (a backend without a stream-ordered path) synchronises `stream`, then
  // allreduce_async.
  virtual WorkPtr allreduce_stream_async(const Tensor& t, ReduceOp op, void* stream);
  // ZeRO's gradient reduction on the GPU path (the Reducer with ReducerOptions::shard): the
  // in-place block reduce-scatter above, stream-ordered as allreduce_stream_async is (t is read
  // as left by the work already on `stream`; the same waits, the same default).
  virtual WorkPtr reduce_scatter_blocks_stream_async(const Tensor& t, ReduceOp op, void* stream);
  // True when device collectives run on the device in stream order (nccl): their results can
  // be waited for by a stream (stream_wait_collectives) instead of the host. False (ring,
  // single): wait() the Works; the results are in device memory when they complete.
  virtual bool device_native() const { return false; }
  // Work submitted to `stream` (a cudaStream_t) after this call waits, on the device, for every
  // collective issued so far (nccl: an event recorded on its stream). The default does nothing:
  // the backends that are not device_native() complete collectives on the host, so wait() on
  // their Works is the ordering.
  virtual void stream_wait_collectives(void* stream) { (void)stream; }

  // The flight recorder of backends that keep one (ring: its last collectives, always on; see
  // collectives/flight_recorder.h), else null. Set its path to have it written on failures.
  virtual FlightRecorder* flight_recorder() { return nullptr; }
  // Writes the flight record now (SIGUSR2; the backend writes it by itself on a communication
  // error, a timeout and abort()). Never throws; a no-op without a recorder or a path.
  virtual void write_flight_record(const std::string& why) { (void)why; }
  // The peers this rank reaches through shared memory (ring), in rank order; empty otherwise.
  virtual std::vector<int> shared_memory_peers() const { return {}; }
  // The host every rank runs on, as the backend's messages name them (ring; empty otherwise).
  virtual std::vector<std::string> rank_hosts() const { return {}; }
};

// "ring allreduce #12 (f32, 1048576 elements, sum)"; op and root are left out when absent
// (op_name null, root < 0).
std::string collective_description(const char* backend, const char* name, uint64_t seq, DType dtype, int64_t count,
                                   const char* op_name, int root);

// Checks every backend applies before issuing (a DpError naming the collective otherwise):
// defined, contiguous CPU-or-device tensors of a supported dtype, matching sizes, root in range,
// in and out on one device.
void check_collective_dtype(const Tensor& t, const std::string& what);
// The stream-ordered forms' own check: `t` is a device tensor ("<backend> <op>: takes a device
// tensor, got ..."). Runs on every bucket of every step: the message is made only on failure.
void check_stream_tensor(const Tensor& t, const char* backend, const char* op);
void check_allgather_shapes(const Tensor& in, const Tensor& out, int world, const std::string& what);
void check_reduce_scatter_shapes(const Tensor& in, const Tensor& out, int world, const std::string& what);

// One process: every collective is the identity (allgather and reduce_scatter copy in to out),
// on host and device tensors alike.
class SingleProcessCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const char* backend() const override { return "single"; }
  WorkPtr allreduce_async(const Tensor& t, ReduceOp op) override;
  WorkPtr broadcast_async(const Tensor& t, int root) override;
  WorkPtr allgather_async(const Tensor& in, const Tensor& out) override;
  WorkPtr reduce_scatter_async(const Tensor& in, const Tensor& out, ReduceOp op) override;
  WorkPtr barrier_async() override;
  WorkPtr reduce_scatter_blocks_async(const Tensor& t, ReduceOp op) override;
  WorkPtr allgather_blocks_async(const Tensor& t) override;
  void abort(const std::string& reason) override;
  // Nothing to wait for: the average of one rank's tensor is the tensor, in stream order.
  WorkPtr allreduce_stream_async(const Tensor& t, ReduceOp op, void* stream) override;
  WorkPtr reduce_scatter_blocks_stream_async(const Tensor& t, ReduceOp op, void* stream) override;

 private:
  WorkPtr start(const char* name, const std::string& detail);
  uint64_t seq_ = 0;
  std::string aborted_;
};

}  // namespace dp
