// Linear's GPU path, in ctx.compute (parameters too: low_precision_params()), on the compute
// stream, products summed in f32 (models/layers/linear/lt_matmul.h):
// over M rows (samples x positions: an input [T, in] is M = N T rows of in):
//   y (M, out) = x (M, in) W^T + b      one cuBLASLt matmul, the bias as its epilogue
//   dx (M, in) = dy (M, out) W (out, in)                      beta 0: overwritten
//   dW (out, in) += dy^T (out, M) x (M, in)                   beta 1: accumulated
//   db (out) += column sums of dy          kernels/cuda/elementwise.h bias_grad, f32 sums
// With the GPU plan's Epilogue::Gelu (a tanh gelu folded into this layer):
//   y = gelu(x W^T + b)                    the same matmul, cuBLASLt's GELU_AUX epilogue keeping
//                                          pre = x W^T + b in gelu_pre_
//   g = dy * gelu'(pre)                    the gelu kernel, written over gelu_pre_
// and the three lines above run on g instead of dy. A padded output (pad_out_to, no bias, no
// GELU) is written and read in rows of ld_out_ (LtGemm's ldd and lda), its padding set to 0.
#include "models/layers/linear/linear.h"

#include "kernels/cuda/elementwise.h"
#include "models/layers/gelu/gelu_kernels.h"
#include "models/layers/common.h"
#include "runtime/cuda/exec_context.h"
#include "models/layers/linear/lt_matmul.h"
#include "runtime/cuda/check.h"

namespace dp::models {

void Linear::forward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) {
  DP_CHECK(ctx.gpu, "{}: a GPU tensor but no GPU context", layer_str(*this));
  const DType dt = ctx.compute;
  const int64_t N = x[0].dim(0), M = rows(x[0]);  // samples x positions
  check_gpu_tensor(*this, x[0], dt, with_batch(N, in_shape_), "input");
  check_gpu_tensor(*this, y, dt, with_batch(N, out_shape_), "output");
  DP_CHECK(params_.size() == (bias_ ? 2u : 1u), "{}: {} parameters bound", layer_str(*this), params_.size());
  check_gpu_tensor(*this, params_[0], dt, {out_, in_}, "weight");
  if (bias_) check_gpu_tensor(*this, params_[1], dt, {out_}, "bias");
  // The GPU path applies a GELU only (a folded ReLU is the CPU plan's: linear_onednn.cpp).
  DP_CHECK(epilogue() == Epilogue::None || epilogue() == Epilogue::Gelu, "{}: a {} epilogue on GPU tensors",
           layer_str(*this), epilogue_name(epilogue()));
  if (M == 0) return;
  cuda::LtGemm g;
  g.dtype = dt;
  g.m = M, g.n = out_, g.k = in_;
  g.a = x[0].raw();          // (M, in)
  g.b = params_[0].raw();    // (out, in), used transposed
  g.trans_b = true;
  g.d = y.raw();             // (M, out) in rows of ld_out_
  g.ldd = ld_out_;
  g.bias = bias_ ? params_[1].raw() : nullptr;
  if (epilogue() == Epilogue::Gelu) {
    ensure_capacity(gelu_pre_, {M, out_}, dt, y.device());
    g.gelu_pre = gelu_pre_.raw();
    gelu_pre_fresh_ = true;
  }
  cuda::lt_matmul(*ctx.gpu, g);
  if (padded()) {  // the padding columns [out, ld_out) of each row: 0
    const size_t es = dtype_size(dt);
    CHECK_CUDA(cudaMemset2DAsync(static_cast<char*>(y.raw()) + static_cast<size_t>(out_) * es,
                                 static_cast<size_t>(ld_out_) * es, 0, static_cast<size_t>(ld_out_ - out_) * es,
                                 static_cast<size_t>(M), ctx.gpu->compute()));
  }
}

namespace {
// The gradient the matmuls take: dy, or with a folded GELU g = dy * gelu'(pre) written over pre.
const void* matmul_grad(const Layer& l, const StepContext& ctx, const Tensor& dy, Tensor& pre, bool& fresh, int64_t n) {
  if (l.epilogue() != Epilogue::Gelu) return dy.raw();
  DP_CHECK(fresh && pre.defined() && pre.numel() == n,
           "{}: a backward with a folded GELU needs the forward just before it (its kept GELU input becomes the "
           "gradient, once)",
           layer_str(l));
  fresh = false;
  CHECK_CUDA(kernels::cuda::gelu_backward(ctx.compute, pre.raw(), dy.raw(), pre.raw(), n, /*tanh_approximation=*/true,
                                          ctx.gpu->compute()));
  return pre.raw();
}
}  // namespace

void Linear::backward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor&, const Tensor& dy,
                           std::vector<Tensor>& dx) {
  DP_CHECK(ctx.gpu, "{}: a GPU tensor but no GPU context", layer_str(*this));
  const DType dt = ctx.compute;
  const int64_t N = x[0].dim(0), M = rows(x[0]);  // samples x positions
  check_gpu_tensor(*this, x[0], dt, with_batch(N, in_shape_), "input");
  check_gpu_tensor(*this, dy, dt, with_batch(N, out_shape_), "output gradient");
  if (dx[0].defined()) check_gpu_tensor(*this, dx[0], dt, with_batch(N, in_shape_), "input gradient");
  DP_CHECK(params_.size() == (bias_ ? 2u : 1u) && grads_.size() == params_.size(), "{}: {} parameters bound",
           layer_str(*this), params_.size());
  check_gpu_tensor(*this, params_[0], dt, {out_, in_}, "weight");
  check_gpu_tensor(*this, grads_[0], dt, {out_, in_}, "weight gradient");
  if (bias_) check_gpu_tensor(*this, grads_[1], dt, {out_}, "bias gradient");
  if (M == 0) return;  // no samples: dx is empty and the parameter gradients gain nothing

  const void* g_out = matmul_grad(*this, ctx, dy, gelu_pre_, gelu_pre_fresh_, M * out_);
  if (dx[0].defined()) {
    cuda::LtGemm g;
    g.dtype = dt;
    g.m = M, g.n = in_, g.k = out_;
    g.a = g_out;             // (M, out) in rows of ld_out_
    g.lda = ld_out_;
    g.b = params_[0].raw();  // (out, in)
    g.d = dx[0].raw();       // (M, in)
    cuda::lt_matmul(*ctx.gpu, g);
  }
  cuda::LtGemm w;
  w.dtype = dt;
  w.m = out_, w.n = in_, w.k = M;
  w.a = g_out;  // stored (M, out) in rows of ld_out_, used transposed
  w.lda = ld_out_;
  w.trans_a = true;
  w.b = x[0].raw();  // (M, in)
  w.c = grads_[0].raw();
  w.d = grads_[0].raw();  // (out, in) += dy^T x
  w.beta = 1.0f;
  cuda::lt_matmul(*ctx.gpu, w);
  if (bias_)
    CHECK_CUDA(kernels::cuda::bias_grad(dt, grads_[1].raw(), g_out, M, out_, 1, ctx.gpu->compute()));
}

}  // namespace dp::models
