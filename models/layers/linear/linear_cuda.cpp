// Linear's GPU path, in ctx.compute (parameters too: low_precision_params()), on the compute
// stream, products summed in f32 (models/layers/linear/lt_matmul.h):
//   y (N, out) = x (N, in) W^T + b      one cuBLASLt matmul, the bias as its epilogue
//   dx (N, in) = dy (N, out) W (out, in)                      beta 0: overwritten
//   dW (out, in) += dy^T (out, N) x (N, in)                   beta 1: accumulated
//   db (out) += column sums of dy          kernels/cuda/elementwise.h bias_grad, f32 sums
#include "models/layers/linear/linear.h"

#include "kernels/cuda/elementwise.h"
#include "models/layers/common.h"
#include "runtime/cuda/exec_context.h"
#include "models/layers/linear/lt_matmul.h"
#include "runtime/cuda/check.h"

namespace dp::models {

void Linear::forward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) {
  DP_CHECK(ctx.gpu, "{}: a GPU tensor but no GPU context", layer_str(*this));
  const DType dt = ctx.compute;
  const int64_t N = x[0].dim(0);
  check_gpu_tensor(*this, x[0], dt, {N, in_}, "input");
  check_gpu_tensor(*this, y, dt, {N, out_}, "output");
  DP_CHECK(params_.size() == (bias_ ? 2u : 1u), "{}: {} parameters bound", layer_str(*this), params_.size());
  check_gpu_tensor(*this, params_[0], dt, {out_, in_}, "weight");
  if (bias_) check_gpu_tensor(*this, params_[1], dt, {out_}, "bias");
  if (N == 0) return;
  cuda::LtGemm g;
  g.dtype = dt;
  g.m = N, g.n = out_, g.k = in_;
  g.a = x[0].raw();          // (N, in)
  g.b = params_[0].raw();    // (out, in), used transposed
  g.trans_b = true;
  g.d = y.raw();             // (N, out)
  g.bias = bias_ ? params_[1].raw() : nullptr;
  cuda::lt_matmul(*ctx.gpu, g);
}

void Linear::backward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor&, const Tensor& dy,
                           std::vector<Tensor>& dx) {
  DP_CHECK(ctx.gpu, "{}: a GPU tensor but no GPU context", layer_str(*this));
  const DType dt = ctx.compute;
  const int64_t N = x[0].dim(0);
  check_gpu_tensor(*this, x[0], dt, {N, in_}, "input");
  check_gpu_tensor(*this, dy, dt, {N, out_}, "output gradient");
  if (dx[0].defined()) check_gpu_tensor(*this, dx[0], dt, {N, in_}, "input gradient");
  DP_CHECK(params_.size() == (bias_ ? 2u : 1u) && grads_.size() == params_.size(), "{}: {} parameters bound",
           layer_str(*this), params_.size());
  check_gpu_tensor(*this, params_[0], dt, {out_, in_}, "weight");
  check_gpu_tensor(*this, grads_[0], dt, {out_, in_}, "weight gradient");
  if (bias_) check_gpu_tensor(*this, grads_[1], dt, {out_}, "bias gradient");
  if (N == 0) return;  // no samples: dx is empty and the parameter gradients gain nothing

  if (dx[0].defined()) {
    cuda::LtGemm g;
    g.dtype = dt;
    g.m = N, g.n = in_, g.k = out_;
    g.a = dy.raw();          // (N, out)
    g.b = params_[0].raw();  // (out, in)
    g.d = dx[0].raw();       // (N, in)
    cuda::lt_matmul(*ctx.gpu, g);
  }
  cuda::LtGemm w;
  w.dtype = dt;
  w.m = out_, w.n = in_, w.k = N;
  w.a = dy.raw();  // stored (N, out), used transposed
  w.trans_a = true;
  w.b = x[0].raw();  // (N, in)
  w.c = grads_[0].raw();
  w.d = grads_[0].raw();  // (out, in) += dy^T x
  w.beta = 1.0f;
  cuda::lt_matmul(*ctx.gpu, w);
  if (bias_)
    CHECK_CUDA(kernels::cuda::bias_grad(dt, grads_[1].raw(), dy.raw(), N, out_, 1, ctx.gpu->compute()));
}

}  // namespace dp::models
