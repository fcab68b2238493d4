// GpuRun's CUDA half: the execution context, the fp16 loss scaler with its found-inf flag, the
// profiler capture window (launch/gpu_run.h).
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <vector>

#include "kernels/cuda/cast.h"
#include "kernels/cuda/label_rank.h"
#include "launch/gpu_run.h"
#include "launch/step_readback.h"
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
        found_inf(sizeof(float), exec.compute()), found_host(sizeof(float)), readback(exec.compute()) {
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
  // count_hits: the rows' label ranks on the device and their host copy (grown as needed).
  cuda::DeviceBuffer ranks;
  cuda::PinnedBuffer ranks_host;
  StepReadback readback;  // a training step's losses and hits, read once after its backward
  std::unique_ptr<metrics::CaptureRange> capture;
};

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
  ensure_capacity(dlogits, logits.shape(), DType::F32, logits.device());
  impl_->readback.enqueue(loss, logits, labels, dlogits, static_cast<float>(weight * loss_scale()), classes, slot);
}

std::vector<double> GpuRun::read_step(int64_t& top1, int64_t& top5) { return impl_->readback.read(top1, top5); }

double GpuRun::mean_loss(const models::SoftmaxCrossEntropy& loss, const Tensor& logits, const Tensor& labels,
                         int64_t classes) const {
  return loss.forward_backward(logits, labels, nullptr, impl_->exec.compute(), classes);
}

void GpuRun::count_hits(const Tensor& scores, const Tensor& labels, int64_t& top1, int64_t& top5, int64_t classes) {
  const int64_t rows = scores.dim(0), ld = scores.dim(1), k = classes > 0 ? classes : ld;
  DP_CHECK(k <= ld, "count_hits: {} classes in rows of {} scores", k, ld);
  DP_CHECK(scores.ndim() == 2 && scores.dtype() == DType::F32 && labels.dtype() == DType::I32 &&
               labels.numel() == rows && scores.device().is_cuda() && labels.device().is_cuda(),
           "count_hits of scores {} and labels {}: want f32 (rows, K) and i32 (rows) on the GPU", scores.describe(),
           labels.describe());
  const cudaStream_t s = impl_->exec.compute();
  const size_t bytes = static_cast<size_t>(rows) * sizeof(int32_t);
  if (impl_->ranks.bytes() < bytes) {
    impl_->ranks = cuda::DeviceBuffer(bytes, s);
    impl_->ranks_host = cuda::PinnedBuffer(bytes);
  }
  CHECK_CUDA(kernels::cuda::label_ranks(static_cast<const float*>(scores.raw()), static_cast<const int32_t*>(labels.raw()),
                                        rows, k, 5, impl_->ranks.as<int32_t>(), s, ld));
  CHECK_CUDA(cudaMemcpyAsync(impl_->ranks_host.data(), impl_->ranks.data(), bytes, cudaMemcpyDeviceToHost, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  const int32_t* r = impl_->ranks_host.as<int32_t>();
  for (int64_t i = 0; i < rows; ++i) top1 += r[i] < 1, top5 += r[i] < 5;
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
