// GpuRun's CUDA half: the execution context, the fp16 loss scaler with its found-inf flag, the
// profiler capture window (launch/gpu_run.h).
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cuda/cast.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/label_rank.h"
#include "launch/gpu_run.h"
#include "runtime/cuda/buffers.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/exec_context.h"
#include "runtime/cuda/loss_scale.h"
#include "runtime/cuda/memory_pool.h"
#include "runtime/log.h"
#include "launch/telemetry/capture_range.h"

namespace dp::launch {

struct GpuRun::Impl {
  Impl(const TrainConfig& t, int device)
      : exec(device, static_cast<size_t>(t.workspace_mb) << 20), scaler(scale_options(t)),
        found_inf(sizeof(float), exec.compute()), found_host(sizeof(float)) {
    exec.set_cudnn_api(t.cudnn_api);
    exec.set_tf32(t.tf32);
  }
  static cuda::LossScaleOptions scale_options(const TrainConfig& t) {
    cuda::LossScaleOptions o;
    o.init_scale = static_cast<float>(t.loss_scale_init);
    o.growth_interval = t.loss_scale_growth_interval;
    return o;
  }
  cuda::ExecContext exec;
  cuda::LossScaler scaler;
  cuda::DeviceBuffer found_inf;  // one float: GradScaler's found_inf flag
  cuda::PinnedBuffer found_host;
  // The rows' label ranks of one batch on the device (grown as needed; count_hits and each
  // micro-batch copy them to the host before the next batch's ranks are written, in stream order).
  cuda::DeviceBuffer ranks;
  cuda::PinnedBuffer ranks_host;  // count_hits's
  // The step's micro-batches enqueued so far (enqueue_micro_batch, read by read_step): per slot its
  // rows, classes and mean loss; the rows' ranks and labels one slot after another.
  struct Step {
    std::vector<int64_t> rows, classes;
    int64_t used_rows = 0;
    cuda::PinnedBuffer losses, ranks, labels;
  } step;
  std::unique_ptr<metrics::CaptureRange> capture;

  // The device buffer of `rows` label ranks (grown in `s`'s order).
  int32_t* ranks_for(int64_t rows, cudaStream_t s) {
    const size_t bytes = static_cast<size_t>(rows) * sizeof(int32_t);
    if (ranks.bytes() < bytes) ranks = cuda::DeviceBuffer(bytes, s);
    return ranks.as<int32_t>();
  }
  // `buf` with room for `need` bytes, its first `used` bytes kept. Growing waits for the stream
  // (copies into the old buffer may be in flight): only while the step's sizes are new.
  static void reserve(cuda::PinnedBuffer& buf, size_t used, size_t need, cudaStream_t s) {
    if (buf.bytes() >= need) return;
    CHECK_CUDA(cudaStreamSynchronize(s));
    cuda::PinnedBuffer bigger(std::max(need, 2 * buf.bytes()));
    if (used > 0) std::memcpy(bigger.data(), buf.data(), used);
    buf = std::move(bigger);
  }
};

namespace {

// The label ranks of scores (rows, ld) f32 against labels (rows) i32, both on the GPU, into
// `ranks` (device, rows) on stream s.
void enqueue_label_ranks(const Tensor& scores, const Tensor& labels, int64_t classes, int32_t* ranks,
                         cudaStream_t s) {
  const int64_t rows = scores.dim(0), ld = scores.dim(1), k = classes > 0 ? classes : ld;
  DP_CHECK(k <= ld, "count_hits: {} classes in rows of {} scores", k, ld);
  DP_CHECK(scores.ndim() == 2 && scores.dtype() == DType::F32 && labels.dtype() == DType::I32 &&
               labels.numel() == rows && scores.device().is_cuda() && labels.device().is_cuda(),
           "count_hits of scores {} and labels {}: want f32 (rows, K) and i32 (rows) on the GPU", scores.describe(),
           labels.describe());
  CHECK_CUDA(kernels::cuda::label_ranks(static_cast<const float*>(scores.raw()),
                                        static_cast<const int32_t*>(labels.raw()), rows, k, 5, ranks, s, ld));
}

void add_hits(const int32_t* ranks, int64_t rows, int64_t& top1, int64_t& top5) {
  for (int64_t i = 0; i < rows; ++i) top1 += ranks[i] < 1, top5 += ranks[i] < 5;
}

}  // namespace

GpuRun::GpuRun(const TrainConfig& t, int device)
    : impl_(std::make_unique<Impl>(t, device)), compute_(compute_dtype_of(t.precision)) {}
GpuRun::~GpuRun() = default;

cuda::ExecContext* GpuRun::exec() const { return &impl_->exec; }
void* GpuRun::compute_stream() const { return impl_->exec.compute(); }

StepContext GpuRun::context(bool training, uint64_t seed, uint64_t step, Communicator* comm) const {
  StepContext ctx{training, seed, step, comm};
  ctx.gpu = &impl_->exec;
  ctx.compute = compute_;
  ctx.channels_last = channels_last();
  return ctx;
}

float GpuRun::loss_scale() const { return scaling() ? impl_->scaler.scale() : 1.0f; }

void GpuRun::enqueue_micro_batch(const models::SoftmaxCrossEntropy& loss, const Tensor& logits, const Tensor& labels,
                                 Tensor& dlogits, double weight, int64_t classes, int slot) {
  Impl::Step& st = impl_->step;
  DP_CHECK(slot == static_cast<int>(st.rows.size()) || slot == 0, "GpuRun: micro-batch slot {} after {} slots", slot,
           st.rows.size());
  if (slot == 0) st.rows.clear(), st.classes.clear(), st.used_rows = 0;
  ensure_tensor(dlogits, logits.shape(), DType::F32, logits.device());
  const cudaStream_t s = impl_->exec.compute();
  const int64_t rows = logits.dim(0);
  const size_t row_bytes = sizeof(int32_t), used = static_cast<size_t>(st.used_rows) * row_bytes;
  const size_t need = used + static_cast<size_t>(rows) * row_bytes;
  Impl::reserve(st.losses, static_cast<size_t>(slot) * sizeof(float), static_cast<size_t>(slot + 1) * sizeof(float), s);
  Impl::reserve(st.ranks, used, need, s);
  Impl::reserve(st.labels, used, need, s);
  loss.enqueue(logits, labels, &dlogits, s, st.losses.as<float>() + slot, classes);
  const double f = weight * loss_scale();
  if (f != 1.0) {
    auto* g = static_cast<float*>(dlogits.raw());
    CHECK_CUDA(kernels::cuda::scale(g, g, static_cast<float>(f), dlogits.numel(), s));
  }
  int32_t* ranks = impl_->ranks_for(rows, s);
  enqueue_label_ranks(logits, labels, classes, ranks, s);
  const size_t bytes = static_cast<size_t>(rows) * row_bytes;
  CHECK_CUDA(cudaMemcpyAsync(st.ranks.as<int32_t>() + st.used_rows, ranks, bytes, cudaMemcpyDeviceToHost, s));
  CHECK_CUDA(cudaMemcpyAsync(st.labels.as<int32_t>() + st.used_rows, labels.raw(), bytes, cudaMemcpyDeviceToHost, s));
  st.rows.push_back(rows);
  st.classes.push_back(classes > 0 ? classes : logits.dim(1));
  st.used_rows += rows;
}

std::vector<double> GpuRun::read_step(int64_t& top1, int64_t& top5) {
  const Impl::Step& st = impl_->step;
  CHECK_CUDA(cudaStreamSynchronize(impl_->exec.compute()));  // the step's one wait
  std::vector<double> losses;
  int64_t row = 0;
  for (size_t k = 0; k < st.rows.size(); ++k) {
    const double l = st.losses.as<float>()[k];
    // NaN logits, or a label out of range (the kernel's NaN): name the label as the CPU path does.
    if (std::isnan(l))
      models::SoftmaxCrossEntropy::check_labels(st.labels.as<int32_t>() + row, st.rows[k], st.classes[k]);
    losses.push_back(l);
    row += st.rows[k];
  }
  add_hits(st.ranks.as<int32_t>(), st.used_rows, top1, top5);
  return losses;
}

double GpuRun::mean_loss(const models::SoftmaxCrossEntropy& loss, const Tensor& logits, const Tensor& labels,
                         int64_t classes) const {
  return loss.forward_backward(logits, labels, nullptr, impl_->exec.compute(), classes);
}

void GpuRun::count_hits(const Tensor& scores, const Tensor& labels, int64_t& top1, int64_t& top5, int64_t classes) {
  const cudaStream_t s = impl_->exec.compute();
  const int64_t rows = scores.dim(0);
  const size_t bytes = static_cast<size_t>(rows) * sizeof(int32_t);
  int32_t* ranks = impl_->ranks_for(rows, s);
  enqueue_label_ranks(scores, labels, classes, ranks, s);
  if (impl_->ranks_host.bytes() < bytes) impl_->ranks_host = cuda::PinnedBuffer(bytes);  // nothing in flight into it
  CHECK_CUDA(cudaMemcpyAsync(impl_->ranks_host.data(), ranks, bytes, cudaMemcpyDeviceToHost, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  add_hits(impl_->ranks_host.as<int32_t>(), rows, top1, top5);
}

bool GpuRun::unscale_and_update(Graph& model) {
  if (!scaling()) return true;
  const cudaStream_t s = impl_->exec.compute();
  float* flag = impl_->found_inf.as<float>();
  CHECK_CUDA(cudaMemsetAsync(flag, 0, sizeof(float), s));
  const Tensor& g = model.grads().flat();
  CHECK_CUDA(kernels::cuda::unscale_f32(static_cast<float*>(g.raw()), g.numel(), impl_->scaler.inverse_scale(), flag, s));
  CHECK_CUDA(cudaMemcpyAsync(impl_->found_host.data(), flag, sizeof(float), cudaMemcpyDeviceToHost, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  const bool found = *impl_->found_host.as<float>() != 0.0f;
  const float before = impl_->scaler.scale();
  const bool apply = impl_->scaler.update(found);
  if (!apply) {
    ++skipped_;
    log::get("train")->warn("fp16 gradients overflowed (inf/NaN): step skipped, loss scale {} -> {}", before,
                            impl_->scaler.scale());
  }
  return apply;
}

void GpuRun::synchronize() const { CHECK_CUDA(cudaStreamSynchronize(impl_->exec.compute())); }

uint64_t GpuRun::peak_bytes() const { return cuda::memory_pool_stats(impl_->exec.device()).used_high_bytes; }
uint64_t GpuRun::live_bytes() const { return cuda::memory_pool_stats(impl_->exec.device()).used_bytes; }
uint64_t GpuRun::reserved_peak_bytes() const {
  return cuda::memory_pool_stats(impl_->exec.device()).reserved_high_bytes;
}

void GpuRun::profile_window(const std::string& steps) {
  impl_->capture = std::make_unique<metrics::CaptureRange>(
      metrics::parse_step_range(steps, "profile.steps"), [this](bool start) {
        // The capture covers the steps' GPU work, not what an earlier step left in flight.
        synchronize();
        if (start) CHECK_CUDA(cudaProfilerStart());
        else CHECK_CUDA(cudaProfilerStop());
        log::get("train")->info("profile.steps: cudaProfiler{}", start ? "Start" : "Stop");
      });
}
void GpuRun::before_step(int64_t step) {
  if (impl_->capture) impl_->capture->before_step(step);
}
void GpuRun::after_step(int64_t step) {
  if (impl_->capture) impl_->capture->after_step(step);
}

}  // namespace dp::launch
