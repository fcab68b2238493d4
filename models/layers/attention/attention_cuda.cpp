// CausalSelfAttention's GPU path, in ctx.compute (parameters too: low_precision_params()), on the
// compute stream, over M = N T rows:
//   qkv (M, 3C) = x Wa^T + ba                    cuBLASLt, the bias as its epilogue
//   att (N, T, C) = core(qkv)                    cuDNN's fused attention (stats: each row's
//                                                log-sum-exp) or the own kernel (P: f32)
//   y (M, C) = dropout(att Wp^T + bp)            cuBLASLt; dropout_kernels.h (the CPU's mask)
// and the backward in reverse: the residual dropout's mask on dy, c_proj's three gradients (as
// Linear's), the core's backward into dqkv, c_attn's three. Under 16-bit data the own kernel runs
// on f32 copies of qkv and att (kernels/cuda/cast.h), the straightforward twin over speed.
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/cuda/cast.h"
#include "kernels/cuda/elementwise.h"
#include "models/layers/attention/attention.h"
#include "models/layers/attention/attention_gpu_core.h"
#include "models/layers/attention/attention_kernels.h"
#include "models/layers/common.h"
#include "models/layers/dropout/dropout_kernels.h"
#include "models/layers/linear/lt_matmul.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/cudnn_graph.h"
#include "runtime/cuda/exec_context.h"
#include "models/layers/attention/sdpa_keys.h"
#include "runtime/log.h"

namespace dp::models {

struct CausalSelfAttention::CudaState {
  // Kept by the forward for the backward (whose forward: x, step, mode, core).
  Tensor qkv, att;    // (N, T, 3C), (N, T, C) in ctx.compute
  Tensor stats;       // cuDNN: (N, H, T) f32, each query row's log-sum-exp
  Tensor P;           // own: (N, H, T, T) f32, the probabilities before dropout
  const void* x = nullptr;
  uint64_t step = 0;
  bool training = false;
  AttentionGpuCore core = AttentionGpuCore::Own;
  // The backward's: the dropped dy, d att, d qkv (ctx.compute); the own kernel's f32 copies under
  // 16-bit data and its row sums.
  Tensor gdrop, datt, dqkv, qkv32, att32, dqkv32, row_dot;
  bool cudnn_failed = false;  // cuDNN had no plan once: the own kernel from then on
  uint8_t cores_logged = 0;   // a bit per AttentionGpuCore: each core's choice is logged once
};

namespace {

// One row-major GEMM of the projections (lt_matmul.h's LtGemm).
cuda::LtGemm gemm(DType dt, int64_t m, int64_t n, int64_t k, const void* a, bool trans_a, const void* b, bool trans_b,
                  void* d, float beta = 0.0f, const void* bias = nullptr) {
  cuda::LtGemm g;
  g.dtype = dt;
  g.m = m, g.n = n, g.k = k;
  g.a = a, g.trans_a = trans_a;
  g.b = b, g.trans_b = trans_b;
  g.c = beta != 0.0f ? d : nullptr;
  g.d = d;
  g.beta = beta;
  g.bias = bias;
  return g;
}

// The core a layer runs, and why not cuDNN's, at debug level (subsystem cudnn) the first time
// the layer runs it: at most a line per core and layer (training and evaluation may differ).
void log_core_once(uint8_t& logged, const Layer& layer, AttentionGpuCore core, bool cudnn_failed,
                   const std::string& why) {
  const auto bit = static_cast<uint8_t>(1u << static_cast<unsigned>(core));
  if (logged & bit) return;
  logged |= bit;
  const std::string reason = cudnn_failed ? "cuDNN had no fused attention for this layer's shape" : why;
  log::get("cudnn")->debug("{}: attention core {}{}", layer_str(layer), attention_gpu_core_name(core),
                           reason.empty() ? "" : " (" + reason + ")");
}

cuda::SdpaShape sdpa_shape(DType dt, int64_t N, int64_t H, int64_t T, int64_t D) {
  cuda::SdpaShape s;
  s.dtype = dt, s.b = N, s.h = H, s.s_q = T, s.d = D;
  return s;
}

}  // namespace

void CausalSelfAttention::forward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) {
  DP_CHECK(ctx.gpu, "{}: a GPU tensor but no GPU context", layer_str(*this));
  const int64_t N = x[0].dim(0);
  check_gpu_tensor(*this, x[0], ctx.compute, {N, T_, C_}, "input");
  check_gpu_tensor(*this, y, ctx.compute, {N, T_, C_}, "output");
  forward_gpu(ctx, x[0], &y);
}

// qkv, the core's output and record for x (and, with y, the output).
void CausalSelfAttention::forward_gpu(const StepContext& ctx, const Tensor& x, Tensor* y) {
  const DType dt = ctx.compute;
  const int64_t N = x.dim(0), M = N * T_;
  const size_t wp = o_.bias ? 2 : 1;
  DP_CHECK(params_.size() == (o_.bias ? 4u : 2u), "{}: {} parameters bound", layer_str(*this), params_.size());
  check_gpu_tensor(*this, params_[0], dt, {3 * C_, C_}, "c_attn.weight");
  check_gpu_tensor(*this, params_[wp], dt, {C_, C_}, "c_proj.weight");
  if (!cuda_) cuda_.emplace();
  CudaState& s = *cuda_;
  s.x = nullptr;
  ensure_capacity(s.qkv, {N, T_, 3 * C_}, dt, x.device());
  ensure_capacity(s.att, {N, T_, C_}, dt, x.device());
  if (M == 0) return;
  cuda::lt_matmul(*ctx.gpu, gemm(dt, M, 3 * C_, C_, x.raw(), false, params_[0].raw(), true, s.qkv.raw(), 0.0f,
                                 o_.bias ? params_[1].raw() : nullptr));
  core_forward_gpu(ctx);
  s.x = x.raw(), s.step = ctx.step, s.training = ctx.training;
  if (!y) return;
  cuda::lt_matmul(*ctx.gpu, gemm(dt, M, C_, C_, s.att.raw(), false, params_[wp].raw(), true, y->raw(), 0.0f,
                                 o_.bias ? params_[3].raw() : nullptr));
  if (ctx.training && o_.resid_dropout > 0)
    CHECK_CUDA(kernels::cuda::dropout_forward(dt, y->raw(), y->raw(), y->numel(), o_.resid_dropout, ctx.seed,
                                              resid_stream(ctx.step), ctx.gpu->compute()));
}

// att (and stats or P) from qkv, on the core attention_gpu_core.h chooses.
void CausalSelfAttention::core_forward_gpu(const StepContext& ctx) {
  CudaState& s = *cuda_;
  const DType dt = ctx.compute;
  const int64_t N = s.qkv.dim(0), H = o_.n_head;
  const cudaStream_t stream = ctx.gpu->compute();
  const double p = ctx.training ? o_.dropout : 0.0;
  const AttentionGpuChoice choice = choose_attention_gpu_core(dt, D_, p, ctx.training, o_.sdpa);
  s.core = s.cudnn_failed ? AttentionGpuCore::Own : choice.core;
  log_core_once(s.cores_logged, *this, s.core, s.cudnn_failed, choice.why);
  if (s.core == AttentionGpuCore::CudnnSdpa) {
    ensure_capacity(s.stats, {N, H, T_}, DType::F32, s.qkv.device());
    const cuda::SdpaShape shape = sdpa_shape(dt, N, H, T_, D_);
    const size_t el = dtype_size(dt);
    char* qkv = static_cast<char*>(s.qkv.raw());
    void* ptrs[] = {qkv, qkv + C_ * el, qkv + 2 * C_ * el, s.att.raw(), s.stats.raw()};
    const cuda::PlanKey key = cuda::sdpa_fprop_key(shape, cuda::sdpa_fused_qkv(shape),
                                                   {true, static_cast<float>(1.0 / std::sqrt(double(D_)))}, true,
                                                   {ptrs[0], ptrs[1], ptrs[2], ptrs[3], ptrs[4]}, ctx.gpu->device());
    try {
      auto plan = cuda::choose_graph_plan(*ctx.gpu, {{{key, std::vector<void*>(ptrs, ptrs + 5)}}}, layer_str(*this));
      plan->execute(*ctx.gpu, ptrs);
      return;
    } catch (const cuda::NoGraphPlan& e) {
      log::get("cudnn")->warn("{}: cuDNN has no fused attention for {}: the own attention kernel runs from now on ({})",
                              layer_str(*this), key.str(), e.what());
      s.cudnn_failed = true;
      s.core = AttentionGpuCore::Own;
    }
  }
  ensure_capacity(s.P, {N, H, T_, T_}, DType::F32, s.qkv.device());
  const kernels::cpu::AttnDropout drop{p, ctx.seed, attn_stream(ctx.step)};
  if (dt == DType::F32) {
    CHECK_CUDA(kernels::cuda::attention_forward(s.att.data<float>(), s.P.data<float>(), s.qkv.data<float>(), N, T_, H,
                                                D_, drop, stream));
    return;
  }
  ensure_capacity(s.qkv32, s.qkv.shape(), DType::F32, s.qkv.device());
  ensure_capacity(s.att32, s.att.shape(), DType::F32, s.qkv.device());
  CHECK_CUDA(kernels::cuda::widen_to_f32(dt, s.qkv32.data<float>(), s.qkv.raw(), s.qkv.numel(), stream));
  CHECK_CUDA(kernels::cuda::attention_forward(s.att32.data<float>(), s.P.data<float>(), s.qkv32.data<float>(), N, T_,
                                              H, D_, drop, stream));
  CHECK_CUDA(kernels::cuda::narrow_from_f32(dt, s.att.raw(), s.att32.data<float>(), s.att.numel(), stream));
}

void CausalSelfAttention::backward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor&,
                                        const Tensor& dy, std::vector<Tensor>& dx) {
  DP_CHECK(ctx.gpu, "{}: a GPU tensor but no GPU context", layer_str(*this));
  const DType dt = ctx.compute;
  const int64_t N = x[0].dim(0), M = N * T_;
  const size_t wp = o_.bias ? 2 : 1;
  check_gpu_tensor(*this, x[0], dt, {N, T_, C_}, "input");
  check_gpu_tensor(*this, dy, dt, {N, T_, C_}, "output gradient");
  if (dx[0].defined()) check_gpu_tensor(*this, dx[0], dt, {N, T_, C_}, "input gradient");
  DP_CHECK(grads_.size() == params_.size(), "{}: {} gradients bound", layer_str(*this), grads_.size());
  check_gpu_tensor(*this, grads_[0], dt, {3 * C_, C_}, "c_attn.weight gradient");
  check_gpu_tensor(*this, grads_[wp], dt, {C_, C_}, "c_proj.weight gradient");
  const bool kept = cuda_ && cuda_->x == x[0].raw() && cuda_->step == ctx.step && cuda_->training == ctx.training &&
                    cuda_->qkv.defined() && cuda_->qkv.dtype() == dt && cuda_->qkv.dim(0) == N;
  if (!kept) forward_gpu(ctx, x[0], nullptr);
  if (M == 0) return;
  CudaState& s = *cuda_;
  const cudaStream_t stream = ctx.gpu->compute();
  const Device dev = x[0].device();
  const void* g = dy.raw();
  if (ctx.training && o_.resid_dropout > 0) {
    ensure_capacity(s.gdrop, dy.shape(), dt, dev);
    CHECK_CUDA(kernels::cuda::dropout_backward(dt, s.gdrop.raw(), dy.raw(), dy.numel(), o_.resid_dropout, ctx.seed,
                                               resid_stream(ctx.step), stream));
    g = s.gdrop.raw();
  }
  // c_proj: d att = g Wp; dWp += g^T att; dbp += column sums of g.
  ensure_capacity(s.datt, s.att.shape(), dt, dev);
  cuda::lt_matmul(*ctx.gpu, gemm(dt, M, C_, C_, g, false, params_[wp].raw(), false, s.datt.raw()));
  cuda::lt_matmul(*ctx.gpu, gemm(dt, C_, C_, M, g, true, s.att.raw(), false, grads_[wp].raw(), 1.0f));
  if (o_.bias) CHECK_CUDA(kernels::cuda::bias_grad(dt, grads_[3].raw(), g, M, C_, 1, stream));
  core_backward_gpu(ctx);
  // c_attn: dx = dqkv Wa; dWa += dqkv^T x; dba += column sums of dqkv.
  if (dx[0].defined())
    cuda::lt_matmul(*ctx.gpu, gemm(dt, M, C_, 3 * C_, s.dqkv.raw(), false, params_[0].raw(), false, dx[0].raw()));
  cuda::lt_matmul(*ctx.gpu, gemm(dt, 3 * C_, C_, M, s.dqkv.raw(), true, x[0].raw(), false, grads_[0].raw(), 1.0f));
  if (o_.bias) CHECK_CUDA(kernels::cuda::bias_grad(dt, grads_[1].raw(), s.dqkv.raw(), M, 3 * C_, 1, stream));
}

// dqkv from datt on the core the forward ran.
void CausalSelfAttention::core_backward_gpu(const StepContext& ctx) {
  CudaState& s = *cuda_;
  const DType dt = ctx.compute;
  const int64_t N = s.qkv.dim(0), H = o_.n_head;
  const Device dev = s.qkv.device();
  const cudaStream_t stream = ctx.gpu->compute();
  ensure_capacity(s.dqkv, s.qkv.shape(), dt, dev);
  if (s.core == AttentionGpuCore::CudnnSdpa) {
    const cuda::SdpaShape shape = sdpa_shape(dt, N, H, T_, D_);
    const size_t el = dtype_size(dt);
    char* qkv = static_cast<char*>(s.qkv.raw());
    char* dqkv = static_cast<char*>(s.dqkv.raw());
    void* ptrs[] = {qkv,         qkv + C_ * el,  qkv + 2 * C_ * el,     s.att.raw(),           s.datt.raw(),
                    s.stats.raw(), dqkv,         dqkv + C_ * el, dqkv + 2 * C_ * el};
    const cuda::PlanKey key = cuda::sdpa_bprop_key(
        shape, cuda::sdpa_fused_qkv(shape), {true, static_cast<float>(1.0 / std::sqrt(double(D_)))},
        {ptrs[0], ptrs[1], ptrs[2], ptrs[3], ptrs[4], ptrs[5], ptrs[6], ptrs[7], ptrs[8]}, ctx.gpu->device());
    try {
      auto plan = cuda::choose_graph_plan(*ctx.gpu, {{{key, std::vector<void*>(ptrs, ptrs + 9)}}}, layer_str(*this));
      plan->execute(*ctx.gpu, ptrs);
      return;
    } catch (const cuda::NoGraphPlan& e) {
      // The forward's record is the rows' log-sum-exp, which the own kernel cannot use: run the
      // own forward again for its probabilities (att is rewritten with the same values up to rounding).
      log::get("cudnn")->warn("{}: cuDNN has no fused attention backward for {}: the own attention kernel runs from "
                              "now on ({})",
                              layer_str(*this), key.str(), e.what());
      s.cudnn_failed = true;
      core_forward_gpu(ctx);
    }
  }
  const kernels::cpu::AttnDropout drop{ctx.training ? o_.dropout : 0.0, ctx.seed, attn_stream(ctx.step)};
  ensure_capacity(s.row_dot, {N, H, T_}, DType::F32, dev);
  if (dt == DType::F32) {
    CHECK_CUDA(kernels::cuda::attention_backward(s.dqkv.data<float>(), s.row_dot.data<float>(), s.datt.data<float>(),
                                                 s.qkv.data<float>(), s.P.data<float>(), N, T_, H, D_, drop, stream));
    return;
  }
  ensure_capacity(s.qkv32, s.qkv.shape(), DType::F32, dev);
  ensure_capacity(s.att32, s.att.shape(), DType::F32, dev);  // here: d att in f32
  ensure_capacity(s.dqkv32, s.qkv.shape(), DType::F32, dev);
  CHECK_CUDA(kernels::cuda::widen_to_f32(dt, s.qkv32.data<float>(), s.qkv.raw(), s.qkv.numel(), stream));
  CHECK_CUDA(kernels::cuda::widen_to_f32(dt, s.att32.data<float>(), s.datt.raw(), s.datt.numel(), stream));
  CHECK_CUDA(kernels::cuda::attention_backward(s.dqkv32.data<float>(), s.row_dot.data<float>(), s.att32.data<float>(),
                                               s.qkv32.data<float>(), s.P.data<float>(), N, T_, H, D_, drop, stream));
  CHECK_CUDA(kernels::cuda::narrow_from_f32(dt, s.dqkv.raw(), s.dqkv32.data<float>(), s.dqkv.numel(), stream));
}

}  // namespace dp::models
