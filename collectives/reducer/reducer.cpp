#include "collectives/reducer/reducer.h"

#include <algorithm>

#include "collectives/collective_tag.h"
#include "kernels/cpu/cast.h"

namespace dp {

namespace {

void to_wire(const Tensor& src, const Tensor& dst) {
  auto* wire = static_cast<uint16_t*>(dst.raw());
  if (dst.dtype() == DType::BF16) kernels::cpu::f32_to_bf16(wire, src.data<float>(), src.numel());
  else kernels::cpu::f32_to_f16(wire, src.data<float>(), src.numel());
}

void from_wire(const Tensor& src, const Tensor& dst) {
  const auto* wire = static_cast<const uint16_t*>(src.raw());
  if (src.dtype() == DType::BF16) kernels::cpu::bf16_to_f32(dst.data<float>(), wire, dst.numel());
  else kernels::cpu::f16_to_f32(dst.data<float>(), wire, dst.numel());
}

double secs(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

std::vector<Bucket> reducer_buckets(const Graph& graph, const ReducerOptions& options) {
  std::vector<int64_t> numel;
  for (const auto& s : graph.grads().slots()) numel.push_back(s.numel);
  return assign_buckets(numel, std::max<int64_t>(1, options.first_bucket_bytes / 4),
                        std::max<int64_t>(1, options.bucket_bytes / 4));
}

Reducer::Reducer(Communicator& comm, Graph& graph, const ReducerOptions& options)
    : comm_(comm), graph_(graph), opt_(options) {
  DP_CHECK(opt_.wire == DType::F32 || opt_.wire == DType::BF16 || opt_.wire == DType::F16,
           "gradient wire dtype must be f32, bf16 or f16, got {}", dtype_name(opt_.wire));
  DP_CHECK(!opt_.shard || opt_.wire == DType::F32,
           "the sharded gradient reduction (train.zero > 0) sends f32 gradients only, not {} (dist.compress)",
           dtype_name(opt_.wire));
  DP_CHECK(!opt_.on_reduced || (!opt_.gpu && opt_.wire == DType::F32),
           "the Reducer's on_reduced is for f32 gradients on the CPU path");
  buckets_ = reducer_buckets(graph, opt_);
  bucket_of_slot_.assign(graph.grads().slots().size(), -1);
  if (opt_.gpu) init_gpu();  // checks the arena is on the GPU's device
  const Device wire_device = opt_.gpu ? graph.grads().flat().device() : Device::cpu();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    for (int s : buckets_[b].slots) bucket_of_slot_[s] = static_cast<int>(b);
    if (opt_.wire != DType::F32)
      wire_.push_back(Tensor::zeros({buckets_[b].end - buckets_[b].begin}, opt_.wire, wire_device));
  }
  works_.resize(buckets_.size());
}

void Reducer::prepare() {
  pending_.clear();
  for (const auto& b : buckets_) pending_.push_back(static_cast<int>(b.slots.size()));
  ready_.assign(bucket_of_slot_.size(), 0);
  // nccl on the GPU path: finalize() did not wait for the last step's buckets; their errors
  // surface here at the latest (each done by now, or failed by the backend's timeout).
  if (gpu_ && comm_.device_native())
    for (auto& w : works_)
      if (w) w->wait();
  std::fill(works_.begin(), works_.end(), nullptr);
  reported_.assign(buckets_.size(), 0);
}

void Reducer::report_reduced(bool all) {
  for (size_t b = 0; b < buckets_.size(); ++b)
    if (works_[b] && !reported_[b] && (all || works_[b]->is_completed())) {
      reported_[b] = 1;
      opt_.on_reduced(static_cast<int>(b));
    }
}

void Reducer::launch(size_t b) {
  // The bucket's all-reduce carries its number: the flight recorder and the straggler report
  // group by it, the desync check compares it (collectives/collective_tag.h).
  BucketScope tag(static_cast<int32_t>(b));
  if (gpu_) {
    launch_gpu(b);
    return;
  }
  const Bucket& bk = buckets_[b];
  const Tensor grads = graph_.grads().flat().slice_flat(bk.begin, {bk.end - bk.begin});
  if (opt_.shard) {
    works_[b] = comm_.reduce_scatter_blocks_async(grads, ReduceOp::Avg);
  } else if (opt_.wire == DType::F32) {
    works_[b] = comm_.allreduce_async(grads, ReduceOp::Avg);
  } else {
    to_wire(grads, wire_[b]);
    works_[b] = comm_.allreduce_async(wire_[b], ReduceOp::Avg);
  }
}

void Reducer::on_ready(int node) {
  DP_CHECK(!pending_.empty(), "Reducer::on_ready before prepare");
  for (int s : graph_.nodes()[node].param_slots) {
    const int b = bucket_of_slot_[s];
    DP_CHECK(!ready_[s], "gradient of '{}' reported ready twice in one step", graph_.grads().slot(s).name);
    ready_[s] = 1;
    if (--pending_[b] == 0 && opt_.overlap) launch(b);
  }
  if (opt_.on_reduced) report_reduced(false);
}

void Reducer::finalize() {
  std::string missing;
  for (size_t s = 0; s < ready_.size(); ++s)
    if (!ready_[s]) missing += (missing.empty() ? "" : ", ") + graph_.grads().slot(static_cast<int>(s)).name;
  if (!missing.empty() && !opt_.allow_unused)
    throw DpError(fmt::format("[{}] these parameters got no gradient this step: {}; every parameter must take part in "
                              "the loss (or set dist.allow_unused = true to reduce them as zeros)",
                              identity_string(), missing));
  // Exposed time starts here: buckets not yet launched (all of them without overlap) and the
  // wait for those in flight are time backward did not hide.
  const auto t0 = std::chrono::steady_clock::now();
  // A bucket with unused parameters is launched here: their gradients are the zeros that
  // zero_grad left, the same on every rank, so the average is right either way. (On the GPU
  // they are zeroed explicitly, in stream order before their buckets go.)
  if (gpu_ && !missing.empty()) zero_unused_gpu();
  for (size_t b = 0; b < buckets_.size(); ++b)
    if (!works_[b]) launch(b);
  // nccl on the GPU path: no host wait; the compute stream waits for nccl's (finish_gpu).
  const bool host_waits = !gpu_ || !comm_.device_native();
  for (auto& w : works_)
    if (host_waits || w->is_completed()) w->wait();  // rethrows a failed bucket's error
  record_times(host_waits ? secs(std::chrono::steady_clock::now() - t0) : 0.0);
  if (opt_.on_reduced) report_reduced(true);  // every bucket is complete: the host waited (CPU path)
  if (gpu_) {
    finish_gpu();
  } else if (opt_.wire != DType::F32) {
    for (size_t b = 0; b < buckets_.size(); ++b)
      from_wire(wire_[b], graph_.grads().flat().slice_flat(buckets_[b].begin, {buckets_[b].end - buckets_[b].begin}));
  }
  pending_.clear();
}

void Reducer::record_times(double exposed_s) {
  times_ = ReducerStepTimes{};
  times_.exposed_s = exposed_s;
  // Time on the wire: the backend runs the buckets in issue order, each from when it was issued
  // or the previous one finished, whichever is later. Only completed buckets count (all of them
  // once the host waited; with nccl on the GPU, those done by now).
  std::vector<size_t> order;
  for (size_t b = 0; b < works_.size(); ++b)
    if (works_[b]->is_completed()) order.push_back(b);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return works_[a]->seq() < works_[b]->seq(); });
  std::chrono::steady_clock::time_point prev{};
  for (size_t b : order) {
    const auto begin = std::max(works_[b]->issued_at(), prev), end = works_[b]->finished_at();
    times_.buckets.push_back({static_cast<int>(b), begin, end});
    times_.comm_s += secs(end - begin);
    prev = end;
  }
}

}  // namespace dp
