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
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

#include "runtime/tensor.h"

namespace dp {

enum class ReduceOp { Sum, Avg, Max, Min };
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
};

// "ring allreduce #12 (f32, 1048576 elements, sum)"; op and root are left out when absent
// (op_name null, root < 0).
std::string collective_description(const char* backend, const char* name, uint64_t seq, DType dtype, int64_t count,
                                   const char* op_name, int root);

// Checks every backend applies before issuing (a DpError naming the collective otherwise):
// defined, contiguous CPU-or-device tensors of a supported dtype, matching sizes, root in range.
void check_collective_dtype(const Tensor& t, const std::string& what);
void check_allgather_shapes(const Tensor& in, const Tensor& out, int world, const std::string& what);
void check_reduce_scatter_shapes(const Tensor& in, const Tensor& out, int world, const std::string& what);

// One process: every collective is the identity (allgather and reduce_scatter copy in to out).
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
  void abort(const std::string& reason) override;

 private:
  WorkPtr start(const char* name, const std::string& detail);
  uint64_t seq_ = 0;
  std::string aborted_;
};

}  // namespace dp
