#include "models/layers/batchnorm2d/batchnorm2d.h"

#include <cmath>

#include "collectives/communicator.h"
#include "models/layers/batchnorm2d/batchnorm2d_ref.h"
#include "models/layers/common.h"

namespace dp::models {

namespace {
// Running statistics may be f32 (the graph's buffers) or f64 whatever the activations' dtype:
// they are C numbers, read and written through double.
double get(const Tensor& t, int64_t i) {
  return t.dtype() == DType::F64 ? t.data<double>()[i] : static_cast<double>(t.data<float>()[i]);
}
void set(const Tensor& t, int64_t i, double v) {
  if (t.dtype() == DType::F64) t.data<double>()[i] = v;
  else t.data<float>()[i] = static_cast<float>(v);
}
}  // namespace

BnGpuPath bn_gpu_path(bool training, bool synced, BnImpl impl, bool ex_allowed, bool cudnn_refused) {
  if (!training) return BnGpuPath::RunningStats;
  if (synced) return BnGpuPath::OwnSync;
  switch (impl) {
    case BnImpl::Own: return BnGpuPath::Own;
    case BnImpl::CudnnEx:
      if (ex_allowed) return BnGpuPath::CudnnEx;
      break;
    case BnImpl::Cudnn: break;
  }
  return cudnn_refused ? BnGpuPath::Own : BnGpuPath::Cudnn;
}

BatchNorm2d::BatchNorm2d(std::string name, double momentum, double eps)
    : Layer(std::move(name)), momentum_(momentum), eps_(eps) {
  DP_CHECK(momentum_ >= 0 && momentum_ <= 1 && eps_ > 0, "{}: invalid arguments", layer_str(*this));
}

Shape BatchNorm2d::setup(const std::vector<Shape>& in) {
  expect_single_input_rank(*this, in, 3, "[C, H, W]");
  C_ = in[0][0], H_ = in[0][1], W_ = in[0][2];
  return in[0];
}

std::vector<ParamDecl> BatchNorm2d::declare_params() const {
  return {{"weight", {C_}, true, DType::F32, init_constant(1.0)},
          {"bias", {C_}, true, DType::F32, nullptr},
          {"running_mean", {C_}, false, DType::F32, nullptr},
          {"running_var", {C_}, false, DType::F32, init_constant(1.0)},
          {"num_batches_tracked", {}, false, DType::I64, nullptr}};
}

void BatchNorm2d::check_bound(DType dtype) const {
  DP_CHECK(params_.size() == 2 && buffers_.size() == 3, "{}: {} parameters and {} buffers bound, expected 2 and 3",
           layer_str(*this), params_.size(), buffers_.size());
  check_tensor(*this, params_[0], dtype, {C_}, "weight");
  check_tensor(*this, params_[1], dtype, {C_}, "bias");
  for (int i = 0; i < 2; ++i)
    DP_CHECK((buffers_[i].dtype() == DType::F32 || buffers_[i].dtype() == DType::F64) &&
                 buffers_[i].shape() == Shape{C_} && buffers_[i].device().is_cpu(),
             "{}: running statistic is {}, expected f32/f64[{}] on cpu", layer_str(*this), buffers_[i].describe(), C_);
  check_tensor(*this, buffers_[2], DType::I64, {}, "num_batches_tracked");
}

Communicator* BatchNorm2d::sync_comm(const StepContext& ctx) const {
  return sync_ && ctx.training && ctx.comm != nullptr && ctx.comm->size() > 1 ? ctx.comm : nullptr;
}

void BatchNorm2d::statistics(const StepContext& ctx, const Tensor& x, std::vector<double>& mean,
                             std::vector<double>& invstd, std::vector<double>* batch_var, double* count) const {
  const int64_t N = x.dim(0), HW = H_ * W_;
  mean.assign(C_, 0.0);
  invstd.assign(C_, 0.0);
  std::vector<double> var(C_);
  double M = static_cast<double>(N * HW);
  if (Communicator* comm = sync_comm(ctx)) {
    // Two passes over all ranks, as batchnorm2d_stats does over one batch: the global sums and
    // count give the mean, then the global squared deviations from it give the variance.
    Tensor buf = Tensor::zeros({C_ + 1}, DType::F64);
    double* b = buf.data<double>();
    dispatch_float(*this, x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      kernels::cpu::batchnorm2d_channel_sum<T>(b, x.data<T>(), N, C_, HW);
    });
    b[C_] = M;
    comm->allreduce(buf, ReduceOp::Sum);
    M = b[C_];
    for (int64_t c = 0; c < C_; ++c) mean[c] = b[c] / M;
    dispatch_float(*this, x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      kernels::cpu::batchnorm2d_channel_sqdev<T>(b, x.data<T>(), mean.data(), N, C_, HW);
    });
    comm->allreduce(buf.slice_flat(0, {C_}), ReduceOp::Sum);
    for (int64_t c = 0; c < C_; ++c) var[c] = b[c] / M;
  } else if (ctx.training) {
    dispatch_float(*this, x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      kernels::cpu::batchnorm2d_stats<T>(mean.data(), var.data(), x.data<T>(), N, C_, HW);
    });
  } else {
    for (int64_t c = 0; c < C_; ++c) mean[c] = get(buffers_[0], c), var[c] = get(buffers_[1], c);
  }
  for (int64_t c = 0; c < C_; ++c) invstd[c] = 1.0 / std::sqrt(var[c] + eps_);
  if (batch_var) *batch_var = std::move(var);
  if (count) *count = M;
}

void BatchNorm2d::forward_cpu(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) {
  // The CPU plan folds a ReLU at most (into the oneDNN path); the GPU's others are its alone.
  DP_CHECK(epilogue() == Epilogue::None || epilogue() == Epilogue::Relu, "{}: a {} epilogue on CPU tensors",
           layer_str(*this), epilogue_name(epilogue()));
  const DType dt = x[0].dtype();
  const int64_t N = x[0].dim(0);
  check_batched(*this, x[0], dt, N, {C_, H_, W_}, "input");
  check_batched(*this, y, dt, N, {C_, H_, W_}, "output");
  check_bound(dt);
  if (use_onednn(ctx, dt) && sync_comm(ctx) == nullptr) return forward_onednn(ctx, x[0], y);
  check_reference_layout(*this, ctx, x[0]);
  std::vector<double> mean, invstd, var;
  double M = 0;
  statistics(ctx, x[0], mean, invstd, &var, &M);
  if (sync_comm(ctx) != nullptr) sync_stats_ = {x[0].raw(), x[0].shape(), ctx.step, mean, invstd, M};
  if (ctx.training && M <= 1)
    DP_THROW_USER("{}: training needs more than 1 value per channel, got a batch of {} with {}x{} pixels",
                  layer_str(*this), N, H_, W_);
  if (ctx.training) {
    // torch: running = (1 - momentum) running + momentum batch, with the unbiased variance
    // (SyncBN: of the global batch).
    const double unbias = M / (M - 1);
    for (int64_t c = 0; c < C_; ++c) {
      set(buffers_[0], c, (1 - momentum_) * get(buffers_[0], c) + momentum_ * mean[c]);
      set(buffers_[1], c, (1 - momentum_) * get(buffers_[1], c) + momentum_ * var[c] * unbias);
    }
    buffers_[2].data<int64_t>()[0] += 1;
  }
  dispatch_float(*this, dt, [&](auto tag) {
    using T = decltype(tag);
    kernels::cpu::batchnorm2d_forward<T>(y.data<T>(), x[0].data<T>(), params_[0].data<T>(), params_[1].data<T>(),
                                         mean.data(), invstd.data(), N, C_, H_ * W_);
  });
}

void BatchNorm2d::backward_cpu(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor&, const Tensor& dy,
                               std::vector<Tensor>& dx) {
  const DType dt = x[0].dtype();
  const int64_t N = x[0].dim(0);
  check_backward_io(*this, x[0], dy, dx[0], {C_, H_, W_}, {C_, H_, W_});
  check_bound(dt);
  check_grads(*this, dt);
  Communicator* comm = sync_comm(ctx);
  if (use_onednn(ctx, dt) && comm == nullptr) return backward_onednn(ctx, x[0], dy, dx[0]);
  check_reference_layout(*this, ctx, x[0]);
  if (comm == nullptr) {
    std::vector<double> mean, invstd;
    statistics(ctx, x[0], mean, invstd, nullptr, nullptr);
    dispatch_float(*this, dt, [&](auto tag) {
      using T = decltype(tag);
      kernels::cpu::batchnorm2d_backward<T>(data_or_null<T>(dx[0]), grads_[0].data<T>(), grads_[1].data<T>(),
                                            dy.data<T>(), x[0].data<T>(), params_[0].data<T>(), mean.data(),
                                            invstd.data(), ctx.training, N, C_, H_ * W_);
    });
    return;
  }
  // SyncBN: the forward's global statistics; weight and bias gradients from this rank's sums,
  // the input gradient's mean terms from every rank's (torch's SyncBatchNorm backward).
  const SyncStats& st = sync_stats_;
  DP_CHECK(st.x == x[0].raw() && st.shape == x[0].shape() && st.step == ctx.step,
           "{}: SyncBN backward of step {} without its training forward (the statistics kept are of step {}, "
           "input {})",
           layer_str(*this), ctx.step, st.step, shape_str(st.shape));
  const std::vector<double>& mean = st.mean;
  const std::vector<double>& invstd = st.invstd;
  const double M = st.count;
  Tensor sums = Tensor::zeros({2 * C_}, DType::F64);
  double* s = sums.data<double>();
  dispatch_float(*this, dt, [&](auto tag) {
    using T = decltype(tag);
    kernels::cpu::batchnorm2d_grad_sums<T>(s, s + C_, dy.data<T>(), x[0].data<T>(), mean.data(), invstd.data(), N,
                                           C_, H_ * W_);
    T* dw = grads_[0].data<T>();
    T* db = grads_[1].data<T>();
    for (int64_t c = 0; c < C_; ++c) dw[c] += static_cast<T>(s[C_ + c]), db[c] += static_cast<T>(s[c]);
  });
  comm->allreduce(sums, ReduceOp::Sum);
  for (int64_t i = 0; i < 2 * C_; ++i) s[i] /= M;
  if (!dx[0].defined()) return;
  dispatch_float(*this, dt, [&](auto tag) {
    using T = decltype(tag);
    kernels::cpu::batchnorm2d_grad_input<T>(dx[0].data<T>(), dy.data<T>(), x[0].data<T>(), params_[0].data<T>(),
                                            mean.data(), invstd.data(), s, s + C_, N, C_, H_ * W_);
  });
}

void register_batchnorm2d(LayerRegistry& r) {
  r.add("batchnorm2d",
        // eps must be > 0; ranges are inclusive, so its bound is a tiny positive number.
        {float_arg("momentum", 0.1, 0.0, 1.0), float_arg("eps", 1e-5, 1e-12)},
        [](const std::string& name, const LayerArgs& a) {
          return std::make_unique<BatchNorm2d>(name, a.f("momentum"), a.f("eps"));
        });
}

}  // namespace dp::models
