// BatchNorm2d's GPU path (the CPU reference is batchnorm2d.cpp; the layer's header says what each
// path computes): the checks, the state, the choice of path (bn_gpu_path over train.bn_impl),
// SyncBN's global statistics and eval. The implementations are in batchnorm2d_cudnn_cuda.cpp,
// batchnorm2d_own_cuda.cpp and batchnorm2d_cudnn_ex_cuda.cpp (batchnorm2d_gpu.h lists them).
//
// Every path applies the GPU plan's epilogue (runtime/epilogue.h): forward y = relu(bn(x) [+ r]);
// backward on g = dy * (y > 0), r's gradient being g. The own kernels fuse it into their passes;
// cuDNN's persistent call fuses it through its bnOps; the legacy call and SyncBN run our
// elementwise kernels around theirs.
#include "models/layers/batchnorm2d/batchnorm2d.h"

#include <algorithm>

#include "collectives/communicator.h"
#include "models/layers/batchnorm2d/batchnorm2d_apply.h"
#include "models/layers/batchnorm2d/batchnorm2d_gpu.h"
#include "models/layers/batchnorm2d/batchnorm2d_reduce.h"
#include "models/layers/common.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/exec_context.h"
#include "runtime/log.h"

namespace dp::models {

void* grown(Tensor& t, size_t bytes, Device dev) {
  if (!t.defined() || t.nbytes() < bytes)
    t = Tensor::zeros({static_cast<int64_t>(std::max<size_t>(bytes, 1))}, DType::U8, dev);
  return t.raw();
}

void check_cudnn_status(cudnnStatus_t s, const char* call, const char* file, int line) {
  if (s != CUDNN_STATUS_SUCCESS) fail_cudnn(s, call, file, line);
}

const BnCudaState::Descs& BnCudaState::descs_for(const kc::BnDims& d, int64_t H, int64_t W, DType dtype) {
  const Key key{d.N, dtype, d.nhwc};
  auto it = descs.find(key);
  if (it != descs.end()) return it->second;
  Descs ds;
  ds.x.set(dtype, d.N, d.C, H, W, d.nhwc);
  CHECK_CUDNN(cudnnDeriveBNTensorDescriptor(ds.bn.get(), ds.x.get(), CUDNN_BATCHNORM_SPATIAL));
  return descs.emplace(key, std::move(ds)).first->second;
}

const void* epilogue_gradient(const BnCall& c, cuda::DeviceBuffer& buf) {
  if (!c.relu()) return c.dy;
  void* g = c.dr;
  if (!g) {
    buf = cuda::DeviceBuffer(static_cast<size_t>(c.numel()) * dtype_size(c.dt), c.s);
    g = buf.data();
  }
  CHECK_CUDA(kc::batchnorm_relu_mask(g, c.dy, c.y, c.dt, c.numel(), c.s));
  return g;
}

BnCudaState& BatchNorm2d::cuda_state(const StepContext& ctx) {
  DP_CHECK(ctx.gpu != nullptr, "{}: GPU tensors without a GPU context (StepContext::gpu)", layer_str(*this));
  const Device dev = Device::cuda(ctx.gpu->device());
  if (!cuda_ || !(cuda_->device == dev)) {
    // Sized once per layer (C is fixed at setup): device-synchronous allocations, not per step.
    PimplPtr<BnCudaState> st;  // replaces cuda_ once complete
    st.emplace();
    st->device = dev;
    st->C = C_;
    st->saved_mean = Tensor::zeros({C_}, DType::F32, dev);
    st->saved_invvar = Tensor::zeros({C_}, DType::F32, dev);
    st->mean = Tensor::zeros({C_}, DType::F64, dev);
    st->invstd = Tensor::zeros({C_}, DType::F64, dev);
    st->sums = Tensor::zeros({std::max(2 * C_, C_ + 1)}, DType::F64, dev);
    st->coef = Tensor::zeros({6 * C_}, DType::F32, dev);
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

double BatchNorm2d::sync_batch_stats(const StepContext& ctx, const Tensor& x, Communicator* comm) {
  BnCudaState& st = *cuda_;
  const int64_t N = x.dim(0);
  const kc::BnDims d{N, C_, H_ * W_, is_channels_last(ctx, x)};
  const cudaStream_t s = ctx.gpu->compute();
  const size_t bytes = kc::batchnorm_scratch_bytes(d);
  void* scratch = grown(st.scratch, bytes, st.device);
  double* buf = st.sums.data<double>();
  double* mean = st.mean.data<double>();
  // Two passes, as the CPU path: the global sums and count give the mean, then the global
  // squared deviations from it give the variance.
  CHECK_CUDA(kc::batchnorm_channel_sum(buf, x.raw(), x.dtype(), d, scratch, bytes, s));
  CHECK_CUDA(kc::batchnorm_set_count(buf + C_, static_cast<double>(N * H_ * W_), s));
  if (st.count_host.bytes() < sizeof(double)) st.count_host = cuda::PinnedBuffer(sizeof(double));
  CHECK_CUDA(cudaStreamSynchronize(s));  // the communicator reads complete device data
  comm->allreduce(st.sums.slice_flat(0, {C_ + 1}), ReduceOp::Sum);
  CHECK_CUDA(kc::batchnorm_mean(mean, buf, buf + C_, C_, s));
  CHECK_CUDA(cudaMemcpyAsync(st.count_host.data(), buf + C_, sizeof(double), cudaMemcpyDeviceToHost, s));
  CHECK_CUDA(kc::batchnorm_channel_sqdev(buf, x.raw(), x.dtype(), mean, d, scratch, bytes, s));
  CHECK_CUDA(cudaStreamSynchronize(s));  // also completes the count's copy to the host
  comm->allreduce(st.sums.slice_flat(0, {C_}), ReduceOp::Sum);
  const double count = *st.count_host.as<double>();
  if (count <= 1)
    DP_THROW_USER("{}: training needs more than 1 value per channel, got a batch of {} with {}x{} pixels",
                  layer_str(*this), N, H_, W_);
  CHECK_CUDA(kc::batchnorm_finalize(st.invstd.data<double>(), buffers_[0].data<float>(), buffers_[1].data<float>(),
                                    mean, buf, count, momentum_, eps_, true, C_, s));
  return count;
}

namespace {

// The call's tensors: x[0] the input, x[1] the residual under AddRelu.
BnCall make_call(const StepContext& ctx, const Layer& l, const std::vector<Tensor>& x, const Tensor& y,
                 int64_t C, int64_t H, int64_t W, double momentum, double eps) {
  const std::vector<Tensor>& ps = l.params();
  const std::vector<Tensor>& bs = l.buffers();
  return BnCall{.ctx = ctx,
                .layer = layer_str(l),
                .s = ctx.gpu->compute(),
                .dt = ctx.compute,
                .d = {x[0].dim(0), C, H * W, is_channels_last(ctx, x[0])},
                .H = H,
                .W = W,
                .epi = l.epilogue(),
                .momentum = momentum,
                .eps = eps,
                .w = ps[0].data<float>(),
                .b = ps[1].data<float>(),
                .running_mean = bs[0].data<float>(),
                .running_var = bs[1].data<float>(),
                .x = x[0].raw(),
                .r = l.epilogue() == Epilogue::AddRelu ? x[1].raw() : nullptr,
                .y = y.raw()};
}

}  // namespace

void BatchNorm2d::forward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) {
  BnCudaState& st = cuda_state(ctx);
  const DType dt = ctx.compute;
  const int64_t N = x[0].dim(0);
  check_gpu_tensor(*this, x[0], dt, {N, C_, H_, W_}, "input");
  if (epilogue() == Epilogue::AddRelu) check_gpu_tensor(*this, x[1], dt, {N, C_, H_, W_}, "residual input");
  check_gpu_tensor(*this, y, dt, {N, C_, H_, W_}, "output");
  check_bound_gpu();
  Communicator* comm = sync_comm(ctx);
  double count = static_cast<double>(N * H_ * W_);
  if (ctx.training && comm == nullptr && count <= 1)
    DP_THROW_USER("{}: training needs more than 1 value per channel, got a batch of {} with {}x{} pixels",
                  layer_str(*this), N, H_, W_);
  const BnCall c = make_call(ctx, *this, x, y, C_, H_, W_, momentum_, eps_);
  st.last = {};

  const BnExChoice ex = bn_ex_choice(dt, c.d.nhwc, C_, c.epi, ctx.training, comm != nullptr);
  if (impl_ == BnImpl::CudnnEx && ctx.training && !st.ex_logged && !ex.reason.empty()) {
    // Once per layer: at info where the persistent call runs with our epilogue (rare: C not a
    // multiple of 4), at debug where the config key's documented scope rules it out (NCHW, f32).
    log::get("cuda")->log(ex.use ? spdlog::level::info : spdlog::level::debug, "{}: train.bn_impl = cudnn_ex: {}{}",
                          c.layer, ex.reason, ex.use ? "" : "; cuDNN's legacy batch norm runs it");
    st.ex_logged = true;
  }
  BnGpuPath path = bn_gpu_path(ctx.training, comm != nullptr, impl_, ex.use && !st.ex_refused, st.cudnn_refused);
  if (path == BnGpuPath::CudnnEx && !cudnn_ex_forward_train(st, c, ex)) {
    st.ex_refused = true;
    log::get("cuda")->warn("{}: cuDNN does not support its persistent batch norm for {} {} input; using its legacy "
                           "batch norm",
                           c.layer, dtype_name(dt), c.d.nhwc ? "NHWC" : "NCHW");
    path = bn_gpu_path(true, false, BnImpl::Cudnn, false, st.cudnn_refused);
  }
  if (path == BnGpuPath::Cudnn && !cudnn_forward_train(st, c)) {
    st.cudnn_refused = true;
    log::get("cuda")->warn("{}: cuDNN does not support batch-norm training for {} {} input; using dptrain's own "
                           "kernels",
                           c.layer, dtype_name(dt), c.d.nhwc ? "NHWC" : "NCHW");
    path = BnGpuPath::Own;
  }
  if (path == BnGpuPath::Own) own_forward_train(st, c);
  if (path == BnGpuPath::OwnSync) {
    count = sync_batch_stats(ctx, x[0], comm);
    CHECK_CUDA(kc::batchnorm_coefficients(st.own_mean(), st.own_invstd(), st.own_scale(), st.mean.data<double>(),
                                          st.invstd.data<double>(), c.w, C_, c.s));
    CHECK_CUDA(kc::batchnorm_apply(c.y, c.x, c.r, c.relu(), dt, st.own_mean(), st.own_scale(), c.b, c.d, c.s));
  }
  if (path == BnGpuPath::RunningStats) {
    const bool cudnn = impl_ != BnImpl::Own && !st.cudnn_refused;
    if (cudnn && !cudnn_forward_eval(st, c)) {
      st.cudnn_refused = true;
      log::get("cuda")->warn("{}: cuDNN does not support batch-norm inference for {} {} input; using dptrain's own "
                             "kernels",
                             c.layer, dtype_name(dt), c.d.nhwc ? "NHWC" : "NCHW");
    }
    if (!cudnn || st.cudnn_refused) own_forward_eval(st, c);
  }
  if (ctx.training) {
    CHECK_CUDA(kc::increment_counter(buffers_[2].data<int64_t>(), c.s));
    st.last.valid = true;
    st.last.x = x[0].raw();
    st.last.shape = x[0].shape();
    st.last.step = ctx.step;
    st.last.path = path;
    st.last.count = count;
    if (path == BnGpuPath::CudnnEx) st.last.ex = ex;
  }
}

void BatchNorm2d::backward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor& y, const Tensor& dy,
                                std::vector<Tensor>& dx) {
  BnCudaState& st = cuda_state(ctx);
  const DType dt = ctx.compute;
  const int64_t N = x[0].dim(0);
  const Shape shape{N, C_, H_, W_};
  check_gpu_tensor(*this, x[0], dt, shape, "input");
  check_gpu_tensor(*this, y, dt, shape, "output");
  check_gpu_tensor(*this, dy, dt, shape, "output gradient");
  if (dx[0].defined()) check_gpu_tensor(*this, dx[0], dt, shape, "input gradient");
  const bool residual = epilogue() == Epilogue::AddRelu;
  if (residual) {
    check_gpu_tensor(*this, x[1], dt, shape, "residual input");
    if (dx[1].defined()) check_gpu_tensor(*this, dx[1], dt, shape, "residual gradient");
  }
  check_bound_gpu();
  check_gpu_tensor(*this, grads_[0], DType::F32, {C_}, "weight gradient");
  check_gpu_tensor(*this, grads_[1], DType::F32, {C_}, "bias gradient");
  Communicator* comm = sync_comm(ctx);
  BnCall c = make_call(ctx, *this, x, y, C_, H_, W_, momentum_, eps_);
  c.dy = dy.raw();
  c.dx = dx[0].defined() ? dx[0].raw() : nullptr;
  c.dr = residual && dx[1].defined() ? dx[1].raw() : nullptr;
  c.dw = grads_[0].data<float>();
  c.db = grads_[1].data<float>();
  const BnCudaState::Last& last = st.last;
  const bool same = last.valid && last.x == x[0].raw() && last.shape == x[0].shape() && last.step == ctx.step;

  if (!ctx.training) {  // constant statistics: dx = g w / std
    own_running_coefficients(st, c);
    own_backward(st, c, /*batch_stats=*/false);
    return;
  }
  if (comm != nullptr) {
    DP_CHECK(same && last.path == BnGpuPath::OwnSync,
             "{}: SyncBN backward of step {} without its training forward (the statistics kept are of step {}, "
             "input {})",
             c.layer, ctx.step, last.step, shape_str(last.shape));
    // The forward's global statistics; weight and bias gradients from this rank's sums, the input
    // gradient's mean terms from every rank's (torch's SyncBatchNorm backward), on g.
    cuda::DeviceBuffer g_buf;
    const void* g = epilogue_gradient(c, g_buf);
    const kc::BnDims& d = c.d;
    const size_t bytes = kc::batchnorm_scratch_bytes(d);
    void* scratch = grown(st.scratch, bytes, st.device);
    double* sums = st.sums.data<double>();  // [sum g (C), sum g xhat (C)]
    double* mean = st.mean.data<double>();
    double* invstd = st.invstd.data<double>();
    CHECK_CUDA(kc::batchnorm_grad_sums(sums, sums + C_, g, c.x, dt, mean, invstd, d, scratch, bytes, c.s));
    CHECK_CUDA(kc::batchnorm_accumulate_param_grads(c.dw, c.db, sums, sums + C_, C_, c.s));
    CHECK_CUDA(cudaStreamSynchronize(c.s));  // the communicator reads complete device data
    comm->allreduce(st.sums.slice_flat(0, {2 * C_}), ReduceOp::Sum);
    if (c.dx)
      CHECK_CUDA(kc::batchnorm_grad_input(c.dx, g, c.x, dt, c.w, mean, invstd, sums, sums + C_, last.count, d, c.s));
    return;
  }
  const BnGpuPath path = same ? last.path : BnGpuPath::Own;
  if (path == BnGpuPath::CudnnEx) {
    if (cudnn_ex_backward_train(st, c)) return;
    // Refused (not supported, or a workspace above train.workspace_mb): from the next forward on
    // the legacy call runs both passes, so this is said once, not every step.
    st.ex_refused = true;
    log::get("cuda")->warn("{}: cuDNN's persistent batch-norm backward is not available for {} {} input; this "
                           "backward and the later steps use its legacy batch norm",
                           c.layer, dtype_name(dt), c.d.nhwc ? "NHWC" : "NCHW");
  }
  if (path == BnGpuPath::Cudnn || path == BnGpuPath::CudnnEx) {
    if (cudnn_backward_train(st, c)) return;
    st.cudnn_refused = true;
    log::get("cuda")->warn("{}: cuDNN does not support batch-norm backward for {} {} input; using dptrain's own "
                           "kernels",
                           c.layer, dtype_name(dt), c.d.nhwc ? "NHWC" : "NCHW");
  }
  // Our kernels: the forward's statistics when it ran them, else this input's (not the running
  // statistics: those are updated by forwards only).
  if (!(same && last.path == BnGpuPath::Own)) own_statistics(st, c, /*update_running=*/false);
  own_backward(st, c, /*batch_stats=*/true);
}

}  // namespace dp::models
