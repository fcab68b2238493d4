// defines: CausalSelfAttention::backward_needs — what the attention's backward reads of its
// forward (AttentionSaved, attention_cuda.cpp's saved state), per path, for N samples of T tokens
// of width C in H heads (dt: the activations' dtype):
//   every path: its input (c_attn's weight gradient: dqkv^T x), qkv (N, T, 3C) and the heads'
//     output att (N, T, C), not its output;
//   CPU: the probabilities P, (N, H, T, T) in dt on the reference path, (N, H, FlashKept(T).packed)
//     f32 in oneDNN's flash tiles; scratch d att, d qkv and with resid_dropout the dropped dy
//     (N, T, C + 3C + C), in that order (attention_saved.h);
//   CUDA on cuDNN's fused attention: each query row's log-sum-exp (N, H, T) f32; scratch the
//     dropped dy (with resid_dropout), d att and d qkv in dt; and the deterministic backward's
//     workspace (runtime/cuda/graph_plan_key.h sdpa_bprop_workspace_bytes, (N, H, T, T) 16-bit);
//   CUDA on the own kernel (f32, or attention dropout, or a head dim cuDNN refuses): P (N, H, T, T)
//     f32; scratch d att and d qkv in dt and their f32 copies with qkv's (C + 3C + 3C f32 a token)
//     and the rows' dot products (N, H, T) f32.
#include "models/layers/attention/attention.h"
#include "models/layers/attention/flash_core.h"
#include "runtime/cuda/graph_plan_key.h"

namespace dp::models {

BackwardNeeds CausalSelfAttention::backward_needs(const NeedsQuery& q) const {
  const size_t N = static_cast<size_t>(q.out.at(0)), T = static_cast<size_t>(T_), C = static_cast<size_t>(C_);
  const size_t H = static_cast<size_t>(o_.n_head), el = dtype_size(q.dtype), tokens = N * T;
  BackwardNeeds n{.input = true};
  n.kept_bytes = tokens * 4 * C * el;  // qkv, att
  if (q.path != MemoryPath::Cuda) {
    const size_t P = q.path == MemoryPath::CpuOnednn ? static_cast<size_t>(kernels::cpu::FlashKept(T_).packed) : T * T;
    n.kept_bytes += N * H * P * el;
    n.scratch_bytes = tokens * (o_.resid_dropout > 0 ? 5 : 4) * C * el;
    return n;
  }
  const bool cudnn = choose_attention_gpu_core(q.dtype, D_, o_.dropout, true, o_.sdpa).core == AttentionGpuCore::CudnnSdpa;
  if (cudnn) {
    n.kept_bytes += N * H * T * sizeof(float);
    n.scratch_bytes = tokens * (o_.resid_dropout > 0 ? 5 : 4) * C * el;
    n.library_workspace = static_cast<size_t>(cuda::sdpa_bprop_workspace_bytes(q.out.at(0), o_.n_head, T_, T_));
  } else {
    n.kept_bytes += N * H * T * T * sizeof(float);
    n.scratch_bytes = tokens * 4 * C * el + tokens * 7 * C * sizeof(float) + N * H * T * sizeof(float);
  }
  return n;
}

}  // namespace dp::models
