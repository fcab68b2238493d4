// defines: the cuDNN graph-API plan keys of scaled-dot-product attention (pure) — SdpaShape
// (batch, heads, sequence lengths, head dims, dtype), SdpaLayout (the strides of q, k, v and o;
// sdpa_fused_qkv: GPT's rows of a fused QKV projection), sdpa_fprop_key and sdpa_bprop_key.
//
// Usage (a CUDA layer; runtime/cuda/cudnn_graph.h):
//   PlanKey key = sdpa_fprop_key(shape, sdpa_fused_qkv(shape), {.causal = true, .scale = 1/sqrt(D)},
//                                /*training=*/true, {q, k, v, o, stats}, gpu.device());
//   auto plan = choose_graph_plan(gpu, {{{key, {q, k, v, o, stats}}}}, layer_str(*this));  // cached
//   void* ptrs[] = {q, k, v, o, stats};
//   plan->execute(gpu, ptrs);
// and the backward with sdpa_bprop_key and {q, k, v, o, do, stats, dq, dk, dv}. The stats are the
// forward's per-row log-sum-exp (f32, [B,H,S,1]) the backward reads. validate_plan_key checks what
// cuDNN's fused attention needs (16-bit data, head dim a multiple of 8 and at most 256, unit stride
// along it); NoGraphPlan then means this GPU or cuDNN has no engine for the shape.
#pragma once
#include <array>
#include <cstdint>

#include "runtime/cuda/graph_plan_key.h"

namespace dp::cuda {

struct SdpaShape {
  DType dtype = DType::BF16;
  int64_t b = 1;       // batch
  int64_t h = 1;       // query heads
  int64_t h_kv = 0;    // key/value heads (0: h; fewer: grouped-query attention)
  int64_t s_q = 1;     // query length
  int64_t s_kv = 0;    // key/value length (0: s_q)
  int64_t d = 64;      // q/k head dim
  int64_t d_v = 0;     // v/o head dim (0: d)
  // The sizes with the zeros resolved.
  int64_t heads_kv() const { return h_kv > 0 ? h_kv : h; }
  int64_t len_kv() const { return s_kv > 0 ? s_kv : s_q; }
  int64_t dim_v() const { return d_v > 0 ? d_v : d; }
};

// Strides (elements) of q, k, v, o over their logical [B, H, S, D] dims; the gradients dq, dk, dv,
// do lie like q, k, v, o.
struct SdpaLayout {
  std::array<int64_t, 4> q{}, k{}, v{}, o{};
};
// GPT's layout: q, k, v are the three thirds of each row of the fused QKV projection's output
// [B, S, 3, H, D] (so q at +0, k at +H*D, v at +2*H*D elements of one buffer), and o is [B, S, H, D],
// the input of the output projection; needs h_kv == h, s_kv == s_q, d_v == d.
SdpaLayout sdpa_fused_qkv(const SdpaShape& s);

// Tensors q, k, v, o and (training) stats; pointers for their alignment (null: assumed aligned).
PlanKey sdpa_fprop_key(const SdpaShape& s, const SdpaLayout& l, const SdpaOptions& o, bool training,
                       const std::array<const void*, 5>& ptrs, int device);
// Tensors q, k, v, o, do, stats, dq, dk, dv.
PlanKey sdpa_bprop_key(const SdpaShape& s, const SdpaLayout& l, const SdpaOptions& o,
                       const std::array<const void*, 9>& ptrs, int device);

}  // namespace dp::cuda
