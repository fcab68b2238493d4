#include "collectives/communicator.h"

#include <chrono>

namespace dp {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

Work::Work(uint64_t seq, std::string description) : seq_(seq), description_(std::move(description)) {}

const std::string& Work::description() const {
  std::lock_guard lock(mu_);
  if (description_.empty()) description_ = describe();
  return description_;
}

bool Work::is_completed() const {
  std::lock_guard lock(mu_);
  return done_;
}

void Work::wait(double timeout_s) const {
  std::unique_lock lock(mu_);
  if (timeout_s < 0) {
    cv_.wait(lock, [&] { return done_; });
  } else if (!cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return done_; })) {
    lock.unlock();
    throw DpError(fmt::format("{} [{}]: not completed after {} s (wait timeout); the collective is still in flight",
                              description(), identity_string(), timeout_s));
  }
  if (error_) std::rethrow_exception(error_);
}

std::chrono::steady_clock::time_point Work::finished_at() const {
  std::lock_guard lock(mu_);
  return finished_at_;
}

void Work::finish(std::exception_ptr error) {
  {
    std::lock_guard lock(mu_);
    finished_at_ = std::chrono::steady_clock::now();
    done_ = true;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

std::string collective_description(const char* backend, const char* name, uint64_t seq, DType dtype, int64_t count,
                                   const char* op_name, int root) {
  std::string d = fmt::format("{} {} #{} ({}, {} element{}", backend, name, seq, dtype_name(dtype), count,
                              count == 1 ? "" : "s");
  if (op_name) d += fmt::format(", {}", op_name);
  if (root >= 0) d += fmt::format(", root {}", root);
  return d + ")";
}

void check_stream_tensor(const Tensor& t, const char* backend, const char* op) {
  DP_CHECK(t.defined() && t.device().is_cuda(), "{} {}: takes a device tensor, got {}", backend, op,
           t.defined() ? t.describe() : "an undefined tensor");
}

void check_collective_dtype(const Tensor& t, const std::string& what) {
  DP_CHECK(t.defined(), "{}: the tensor is undefined", what);
  const DType d = t.dtype();
  DP_CHECK(d == DType::F32 || d == DType::F16 || d == DType::BF16 || d == DType::F64 || d == DType::I32,
           "{}: dtype {} is not supported by collectives (use f32, f16, bf16, f64 or i32)", what, dtype_name(d));
}

void check_allgather_shapes(const Tensor& in, const Tensor& out, int world, const std::string& what) {
  check_collective_dtype(in, what);
  check_collective_dtype(out, what);
  DP_CHECK(in.dtype() == out.dtype(), "{}: input is {} but output is {}", what, in.describe(), out.describe());
  DP_CHECK(in.device() == out.device(), "{}: input is {} but output is {} (one device per call)", what, in.describe(),
           out.describe());
  DP_CHECK(out.numel() == in.numel() * world, "{}: output has {} elements, expected {} ({} ranks x {})", what,
           out.numel(), in.numel() * world, world, in.numel());
}

void check_reduce_scatter_shapes(const Tensor& in, const Tensor& out, int world, const std::string& what) {
  check_collective_dtype(in, what);
  check_collective_dtype(out, what);
  DP_CHECK(in.dtype() == out.dtype(), "{}: input is {} but output is {}", what, in.describe(), out.describe());
  DP_CHECK(in.device() == out.device(), "{}: input is {} but output is {} (one device per call)", what, in.describe(),
           out.describe());
  DP_CHECK(in.numel() == out.numel() * world, "{}: input has {} elements, expected {} ({} ranks x {})", what,
           in.numel(), out.numel() * world, world, out.numel());
}

// ---- SingleProcessCommunicator ----

WorkPtr Communicator::reduce_scatter_blocks_async(const Tensor&, ReduceOp) {
  DP_THROW_USER("the {} collectives backend has no in-place block reduce-scatter (train.zero > 0); use "
                "dist.backend = \"ring\" or train.zero = 0", backend());
}

WorkPtr Communicator::allgather_blocks_async(const Tensor&) {
  DP_THROW_USER("the {} collectives backend has no in-place block all-gather (train.zero > 0); use "
                "dist.backend = \"ring\" or train.zero = 0", backend());
}

namespace {
// " (f32, 10 elements, sum)": collective_description's tail.
std::string describe(const Tensor& t, const char* op, int root) {
  std::string d = collective_description("", "", 0, t.dtype(), t.numel(), op, root);
  return d.substr(d.find(" ("));
}
}  // namespace

WorkPtr SingleProcessCommunicator::start(const char* name, const std::string& detail) {
  const uint64_t seq = ++seq_;
  auto w = std::make_shared<Work>(seq, fmt::format("single {} #{}{}", name, seq, detail));
  if (!aborted_.empty())
    w->finish(std::make_exception_ptr(DpError(fmt::format("{}: the communicator was aborted: {}", w->description(),
                                                          aborted_))));
  return w;
}

WorkPtr SingleProcessCommunicator::allreduce_async(const Tensor& t, ReduceOp op) {
  check_collective_dtype(t, "single allreduce");
  auto w = start("allreduce", describe(t, reduce_op_name(op), -1));
  if (!w->is_completed()) w->finish();  // the sum, average, max or min of one value is itself
  return w;
}

WorkPtr SingleProcessCommunicator::allreduce_stream_async(const Tensor& t, ReduceOp op, void* stream) {
  (void)stream;  // the result is the input, ordered on `stream` already
  check_collective_dtype(t, "single allreduce");
  auto w = start("allreduce", describe(t, reduce_op_name(op), -1));
  if (!w->is_completed()) w->finish();
  return w;
}

WorkPtr SingleProcessCommunicator::broadcast_async(const Tensor& t, int root) {
  DP_CHECK(root == 0, "broadcast root {} in a world of 1", root);
  check_collective_dtype(t, "single broadcast");
  auto w = start("broadcast", describe(t, nullptr, root));
  if (!w->is_completed()) w->finish();
  return w;
}

WorkPtr SingleProcessCommunicator::allgather_async(const Tensor& in, const Tensor& out) {
  check_allgather_shapes(in, out, 1, "single allgather");
  auto w = start("allgather", describe(out, nullptr, -1));
  if (!w->is_completed()) {
    out.reshape(in.shape()).copy_from(in);
    w->finish();
  }
  return w;
}

WorkPtr SingleProcessCommunicator::reduce_scatter_async(const Tensor& in, const Tensor& out, ReduceOp op) {
  check_reduce_scatter_shapes(in, out, 1, "single reduce_scatter");
  auto w = start("reduce_scatter", describe(in, reduce_op_name(op), -1));
  if (!w->is_completed()) {
    out.reshape(in.shape()).copy_from(in);
    w->finish();
  }
  return w;
}

WorkPtr SingleProcessCommunicator::reduce_scatter_blocks_async(const Tensor& t, ReduceOp op) {
  check_collective_dtype(t, "single reduce_scatter_blocks");
  auto w = start("reduce_scatter_blocks", describe(t, reduce_op_name(op), -1));
  if (!w->is_completed()) w->finish();  // one block: the reduction of one value is itself
  return w;
}

WorkPtr SingleProcessCommunicator::reduce_scatter_blocks_stream_async(const Tensor& t, ReduceOp op, void* stream) {
  (void)stream;  // one block, ordered on `stream` already
  return reduce_scatter_blocks_async(t, op);
}

WorkPtr SingleProcessCommunicator::allgather_blocks_async(const Tensor& t) {
  check_collective_dtype(t, "single allgather_blocks");
  auto w = start("allgather_blocks", describe(t, nullptr, -1));
  if (!w->is_completed()) w->finish();
  return w;
}

WorkPtr SingleProcessCommunicator::barrier_async() {
  auto w = start("barrier", "");
  if (!w->is_completed()) w->finish();
  return w;
}

void SingleProcessCommunicator::abort(const std::string& reason) {
  if (aborted_.empty()) aborted_ = reason.empty() ? "abort() called" : reason;
}

}  // namespace dp
