// BatchNorm2d's GPU path (the CPU reference is batchnorm2d.cpp; the layer's header says what each
// path computes).
//
// cuDNN's running variance: cudnnBatchNormalizationForwardTraining documents resultRunningVariance
// only as "the moving average of variance[x]" (factor applied as for the mean:
// running = factor * batch + (1 - factor) * running, so factor = torch's momentum). That the
// batch variance it averages is the unbiased one (M / (M - 1) times the biased variance the batch
// is normalised with) is what torch relies on, since torch's CUDA batch norm calls this very
// function and its running_var is unbiased (pytorch/pytorch#19902: "the cudnn version has the
// same [unbiased running variance]"), and MXNet measured it (apache/mxnet#21111: the cuDNN
// batchnorm's moving variance is the unbiased estimate, its own kernel's the biased one). The
// bn_train case of tests/models/test_cuda_layers.cpp compares the running statistics with the
// CPU twin's (which applies M / (M - 1) explicitly), so a GPU run checks it.
//
// Mode: CUDNN_BATCHNORM_SPATIAL for every dtype and layout. SPATIAL_PERSISTENT (faster for
// 16-bit NHWC) "imposes some limits on the range of values" (cudnn_ops.h) that it does not state,
// so it is not used until it has been measured against the CPU twin on a GPU.
#include "models/layers/batchnorm2d/batchnorm2d.h"

#include <algorithm>
#include <compare>
#include <map>

#include "collectives/communicator.h"
#include "models/layers/batchnorm2d/batchnorm2d_kernels.h"
#include "models/layers/common.h"
#include "runtime/cuda/buffers.h"
#include "runtime/cuda/cudnn_desc.h"
#include "runtime/cuda/exec_context.h"
#include "runtime/cuda/check.h"
#include "runtime/log.h"

namespace dp::models {

namespace {
namespace kc = kernels::cuda;

// A cuDNN status other than success and NOT_SUPPORTED (which the caller handles) is fatal.
void check_cudnn(cudnnStatus_t s, const char* call, int line) {
  if (s != CUDNN_STATUS_SUCCESS) fail_cudnn(s, call, __FILE__, line);
}

// bytes of device scratch in t, grown (never shrunk) when a larger shape needs more.
void* grown(Tensor& t, size_t bytes, Device dev) {
  if (!t.defined() || t.nbytes() < bytes) t = Tensor::zeros({static_cast<int64_t>(std::max<size_t>(bytes, 1))}, DType::U8, dev);
  return t.raw();
}
}  // namespace

struct BatchNorm2d::CudaState {
  struct Key {
    int64_t n;
    DType dtype;
    bool nhwc;
    auto operator<=>(const Key&) const = default;
  };
  struct Descs {
    cuda::TensorDesc x;   // x, y, dx, dy (N, C, H, W)
    cuda::TensorDesc bn;  // weight, bias, running and saved statistics (1, C, 1, 1), f32
  };
  // What the last training forward left for its backward.
  struct Last {
    bool valid = false;
    const void* x = nullptr;
    Shape shape;
    uint64_t step = 0;
    BnGpuPath path = BnGpuPath::CudnnBatchStats;
    double count = 0;  // values per channel behind the statistics (all ranks' under SyncBN)
  };

  Device device;
  std::map<Key, Descs> descs;
  Tensor saved_mean, saved_invvar;  // (C) f32: cuDNN's saved batch mean and 1/std
  Tensor mean, invstd;              // (C) f64: our kernels' statistics
  Tensor sums;                      // (max(2C, C+1)) f64: [sum (C), count] or [sum dy, sum dy xhat]; all-reduced
  Tensor scratch;                   // u8: the sum kernels' partial sums (kc::batchnorm_scratch_bytes)
  Tensor dx_scratch;                // u8: cuDNN's dx when the caller wants none
  cuda::PinnedBuffer count_host;    // (1) f64: SyncBN's all-reduced count, read after a stream sync
  bool cudnn_refused = false;
  Last last;

  const Descs& descs_for(int64_t N, int64_t C, int64_t H, int64_t W, DType dtype, bool nhwc) {
    const Key key{N, dtype, nhwc};
    auto it = descs.find(key);
    if (it != descs.end()) return it->second;
    Descs d;
    d.x.set(dtype, N, C, H, W, nhwc);
    CHECK_CUDNN(cudnnDeriveBNTensorDescriptor(d.bn.get(), d.x.get(), CUDNN_BATCHNORM_SPATIAL));
    return descs.emplace(key, std::move(d)).first->second;
  }
  void* scratch_for(const kc::BnDims& d, size_t* bytes) {
    *bytes = kc::batchnorm_scratch_bytes(d);
    return grown(scratch, *bytes, device);
  }
};

BatchNorm2d::CudaState& BatchNorm2d::cuda_state(const StepContext& ctx) {
  DP_CHECK(ctx.gpu != nullptr, "{}: GPU tensors without a GPU context (StepContext::gpu)", layer_str(*this));
  const Device dev = Device::cuda(ctx.gpu->device());
  if (!cuda_ || !(cuda_->device == dev)) {
    // Sized once per layer (C is fixed at setup): device-synchronous allocations, not per step.
    PimplPtr<CudaState> st;  // replaces cuda_ once complete
    st.emplace();
    st->device = dev;
    st->saved_mean = Tensor::zeros({C_}, DType::F32, dev);
    st->saved_invvar = Tensor::zeros({C_}, DType::F32, dev);
    st->mean = Tensor::zeros({C_}, DType::F64, dev);
    st->invstd = Tensor::zeros({C_}, DType::F64, dev);
    st->sums = Tensor::zeros({std::max(2 * C_, C_ + 1)}, DType::F64, dev);
    cuda_ = std::move(st);
  }
  return *cuda_;
}

void BatchNorm2d::check_bound_gpu() const {
  DP_CHECK(params_.size() == 2 && buffers_.size() == 3, "{}: {} parameters and {} buffers bound, expected 2 and 3",
           layer_str(*this), params_.size(), buffers_.size());
  check_gpu_tensor(*this, params_[0], DType::F32, {C_}, "weight");
  check_gpu_tensor(*this, params_[1], DType::F32, {C_}, "bias");
  check_gpu_tensor(*this, buffers_[0], DType::F32, {C_}, "running_mean");
  check_gpu_tensor(*this, buffers_[1], DType::F32, {C_}, "running_var");
  check_gpu_tensor(*this, buffers_[2], DType::I64, {}, "num_batches_tracked");
}

double BatchNorm2d::own_batch_stats(const StepContext& ctx, const Tensor& x, Communicator* comm, bool update_running) {
  CudaState& st = *cuda_;
  const int64_t N = x.dim(0);
  const kc::BnDims d{N, C_, H_ * W_, is_channels_last(ctx, x)};
  const cudaStream_t s = ctx.gpu->compute();
  size_t bytes = 0;
  void* scratch = st.scratch_for(d, &bytes);
  double* buf = st.sums.data<double>();
  double* mean = st.mean.data<double>();
  double count = static_cast<double>(N * H_ * W_);
  // Two passes, as the CPU path: the (global) sums and count give the mean, then the (global)
  // squared deviations from it give the variance.
  CHECK_CUDA(kc::batchnorm_channel_sum(buf, x.raw(), x.dtype(), d, scratch, bytes, s));
  CHECK_CUDA(kc::batchnorm_set_count(buf + C_, count, s));
  if (comm) {
    if (st.count_host.bytes() < sizeof(double)) st.count_host = cuda::PinnedBuffer(sizeof(double));
    CHECK_CUDA(cudaStreamSynchronize(s));  // the communicator reads complete device data
    comm->allreduce(st.sums.slice_flat(0, {C_ + 1}), ReduceOp::Sum);
  }
  CHECK_CUDA(kc::batchnorm_mean(mean, buf, buf + C_, C_, s));
  if (comm)
    CHECK_CUDA(cudaMemcpyAsync(st.count_host.data(), buf + C_, sizeof(double), cudaMemcpyDeviceToHost, s));
  CHECK_CUDA(kc::batchnorm_channel_sqdev(buf, x.raw(), x.dtype(), mean, d, scratch, bytes, s));
  if (comm) {
    CHECK_CUDA(cudaStreamSynchronize(s));  // also completes the count's copy to the host
    comm->allreduce(st.sums.slice_flat(0, {C_}), ReduceOp::Sum);
    count = *st.count_host.as<double>();
  }
  if (update_running && count <= 1)
    DP_THROW_USER("{}: training needs more than 1 value per channel, got a batch of {} with {}x{} pixels",
                  layer_str(*this), N, H_, W_);
  CHECK_CUDA(kc::batchnorm_finalize(st.invstd.data<double>(), buffers_[0].data<float>(), buffers_[1].data<float>(),
                                    mean, buf, count, momentum_, eps_, update_running, C_, s));
  return count;
}

void BatchNorm2d::forward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) {
  CudaState& st = cuda_state(ctx);
  const DType dt = ctx.compute;
  const int64_t N = x[0].dim(0);
  check_gpu_tensor(*this, x[0], dt, {N, C_, H_, W_}, "input");
  check_gpu_tensor(*this, y, dt, {N, C_, H_, W_}, "output");
  check_bound_gpu();
  const bool nhwc = is_channels_last(ctx, x[0]);
  const kc::BnDims d{N, C_, H_ * W_, nhwc};
  const cudaStream_t s = ctx.gpu->compute();
  Communicator* comm = sync_comm(ctx);
  double count = static_cast<double>(N * H_ * W_);
  if (ctx.training && comm == nullptr && count <= 1)
    DP_THROW_USER("{}: training needs more than 1 value per channel, got a batch of {} with {}x{} pixels",
                  layer_str(*this), N, H_, W_);
  const float* w = params_[0].data<float>();
  const float* b = params_[1].data<float>();
  float* running_mean = buffers_[0].data<float>();
  float* running_var = buffers_[1].data<float>();
  const float one = 1.0f, zero = 0.0f;  // cuDNN's blend factors are float for f32/f16/bf16 data
  st.last = {};
  const auto refuse = [&](const char* call) {
    st.cudnn_refused = true;
    log::get("cuda")->warn("{}: cuDNN does not support {} for {} {} input; using dptrain's own kernels",
                           layer_str(*this), call, dtype_name(dt), nhwc ? "NHWC" : "NCHW");
  };

  BnGpuPath path = bn_gpu_path(ctx.training, comm != nullptr, st.cudnn_refused);
  if (path == BnGpuPath::CudnnBatchStats) {
    const auto& ds = st.descs_for(N, C_, H_, W_, dt, nhwc);
    const cudnnStatus_t r = cudnnBatchNormalizationForwardTraining(
        ctx.gpu->cudnn(), CUDNN_BATCHNORM_SPATIAL, &one, &zero, ds.x.get(), x[0].raw(), ds.x.get(), y.raw(),
        ds.bn.get(), w, b, momentum_, running_mean, running_var, eps_, st.saved_mean.raw(), st.saved_invvar.raw());
    if (r == CUDNN_STATUS_NOT_SUPPORTED) {
      refuse("batch-norm training");
      path = BnGpuPath::OwnBatchStats;
    } else {
      check_cudnn(r, "cudnnBatchNormalizationForwardTraining", __LINE__);
    }
  }
  if (path == BnGpuPath::OwnBatchStats) {
    count = own_batch_stats(ctx, x[0], comm, /*update_running=*/true);
    CHECK_CUDA(kc::batchnorm_forward(y.raw(), x[0].raw(), dt, w, b, st.mean.data<double>(), st.invstd.data<double>(),
                                     d, s));
  }
  if (path == BnGpuPath::RunningStats) {
    cudnnStatus_t r = CUDNN_STATUS_NOT_SUPPORTED;
    if (!st.cudnn_refused) {
      const auto& ds = st.descs_for(N, C_, H_, W_, dt, nhwc);
      r = cudnnBatchNormalizationForwardInference(ctx.gpu->cudnn(), CUDNN_BATCHNORM_SPATIAL, &one, &zero, ds.x.get(),
                                                  x[0].raw(), ds.x.get(), y.raw(), ds.bn.get(), w, b, running_mean,
                                                  running_var, eps_);
      if (r == CUDNN_STATUS_NOT_SUPPORTED) refuse("batch-norm inference");
      else check_cudnn(r, "cudnnBatchNormalizationForwardInference", __LINE__);
    }
    if (r != CUDNN_STATUS_SUCCESS) {
      CHECK_CUDA(kc::batchnorm_running_stats(st.mean.data<double>(), st.invstd.data<double>(), running_mean,
                                             running_var, eps_, C_, s));
      CHECK_CUDA(kc::batchnorm_forward(y.raw(), x[0].raw(), dt, w, b, st.mean.data<double>(),
                                       st.invstd.data<double>(), d, s));
    }
  }
  if (ctx.training) {
    CHECK_CUDA(kc::increment_counter(buffers_[2].data<int64_t>(), s));
    st.last = {true, x[0].raw(), x[0].shape(), ctx.step, path, count};
  }
}

void BatchNorm2d::backward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor&, const Tensor& dy,
                                std::vector<Tensor>& dx) {
  CudaState& st = cuda_state(ctx);
  const DType dt = ctx.compute;
  const int64_t N = x[0].dim(0);
  check_gpu_tensor(*this, x[0], dt, {N, C_, H_, W_}, "input");
  check_gpu_tensor(*this, dy, dt, {N, C_, H_, W_}, "output gradient");
  if (dx[0].defined()) check_gpu_tensor(*this, dx[0], dt, {N, C_, H_, W_}, "input gradient");
  check_bound_gpu();
  check_gpu_tensor(*this, grads_[0], DType::F32, {C_}, "weight gradient");
  check_gpu_tensor(*this, grads_[1], DType::F32, {C_}, "bias gradient");
  const bool nhwc = is_channels_last(ctx, x[0]);
  const kc::BnDims d{N, C_, H_ * W_, nhwc};
  const cudaStream_t s = ctx.gpu->compute();
  Communicator* comm = sync_comm(ctx);
  const float* w = params_[0].data<float>();
  float* dw = grads_[0].data<float>();
  float* db = grads_[1].data<float>();
  double* sums = st.sums.data<double>();  // [sum dy (C), sum dy xhat (C)]
  double* mean = st.mean.data<double>();
  double* invstd = st.invstd.data<double>();
  const CudaState::Last& last = st.last;
  const bool same = last.valid && last.x == x[0].raw() && last.shape == x[0].shape() && last.step == ctx.step;

  // Our kernels' backward from the statistics in mean / invstd: local gradient sums, the weight
  // and bias gradients from them, then (all_reduce: SyncBN) every rank's sums for dx.
  // count 0: running statistics (constants), dx = dy * w * invstd.
  const auto own_backward = [&](double count, bool all_reduce) {
    size_t bytes = 0;
    void* scratch = st.scratch_for(d, &bytes);
    CHECK_CUDA(kc::batchnorm_grad_sums(sums, sums + C_, dy.raw(), x[0].raw(), dt, mean, invstd, d, scratch, bytes, s));
    CHECK_CUDA(kc::batchnorm_accumulate_param_grads(dw, db, sums, sums + C_, C_, s));
    if (all_reduce) {
      CHECK_CUDA(cudaStreamSynchronize(s));  // the communicator reads complete device data
      comm->allreduce(st.sums.slice_flat(0, {2 * C_}), ReduceOp::Sum);
    }
    if (!dx[0].defined()) return;
    const bool batch_stats = count > 0;
    CHECK_CUDA(kc::batchnorm_grad_input(dx[0].raw(), dy.raw(), x[0].raw(), dt, w, mean, invstd,
                                        batch_stats ? sums : nullptr, batch_stats ? sums + C_ : nullptr, count, d, s));
  };

  if (!ctx.training) {
    CHECK_CUDA(kc::batchnorm_running_stats(mean, invstd, buffers_[0].data<float>(), buffers_[1].data<float>(), eps_,
                                           C_, s));
    own_backward(0, false);
    return;
  }
  if (comm != nullptr) {
    DP_CHECK(same && last.path == BnGpuPath::OwnBatchStats,
             "{}: SyncBN backward of step {} without its training forward (the statistics kept are of step {}, "
             "input {})",
             layer_str(*this), ctx.step, last.step, shape_str(last.shape));
    own_backward(last.count, true);
    return;
  }
  const bool cudnn = same ? last.path == BnGpuPath::CudnnBatchStats : !st.cudnn_refused;
  if (cudnn) {
    const auto& ds = st.descs_for(N, C_, H_, W_, dt, nhwc);
    // dx overwritten (alpha 1, beta 0); weight and bias gradients accumulated (alpha 1, beta 1).
    const float one = 1.0f, zero = 0.0f;
    void* dxp = dx[0].defined() ? dx[0].raw() : grown(st.dx_scratch, x[0].nbytes(), st.device);
    // Without the forward's saved statistics (a backward for another input) cuDNN recomputes
    // them from x, as the CPU path always does.
    const void* saved_mean = same ? st.saved_mean.raw() : nullptr;
    const void* saved_invvar = same ? st.saved_invvar.raw() : nullptr;
    const cudnnStatus_t r = cudnnBatchNormalizationBackward(
        ctx.gpu->cudnn(), CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &one, ds.x.get(), x[0].raw(), ds.x.get(),
        dy.raw(), ds.x.get(), dxp, ds.bn.get(), w, dw, db, eps_, saved_mean, saved_invvar);
    if (r != CUDNN_STATUS_NOT_SUPPORTED) {
      check_cudnn(r, "cudnnBatchNormalizationBackward", __LINE__);
      return;
    }
    st.cudnn_refused = true;
    log::get("cuda")->warn("{}: cuDNN does not support batch-norm backward for {} {} input; using dptrain's own kernels",
                           layer_str(*this), dtype_name(dt), nhwc ? "NHWC" : "NCHW");
  }
  const bool have_stats = same && last.path == BnGpuPath::OwnBatchStats;
  const double count = have_stats ? last.count : own_batch_stats(ctx, x[0], nullptr, /*update_running=*/false);
  own_backward(count, false);
}

}  // namespace dp::models
