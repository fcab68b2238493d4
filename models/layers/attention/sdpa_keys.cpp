#include "models/layers/attention/sdpa_keys.h"

#include "base/error.h"

namespace dp::cuda {

namespace {
using Dims = std::array<int64_t, 4>;

Dims q_dims(const SdpaShape& s) { return {s.b, s.h, s.s_q, s.d}; }
Dims k_dims(const SdpaShape& s) { return {s.b, s.heads_kv(), s.len_kv(), s.d}; }
Dims v_dims(const SdpaShape& s) { return {s.b, s.heads_kv(), s.len_kv(), s.dim_v()}; }
Dims o_dims(const SdpaShape& s) { return {s.b, s.h, s.s_q, s.dim_v()}; }

GraphTensor tensor(const Dims& dims, const Dims& strides, DType dtype, const void* p) {
  return GraphTensor{dims, strides, dtype, byte_alignment(p)};
}
GraphTensor stats(const SdpaShape& s, const void* p) {
  const Dims d{s.b, s.h, s.s_q, 1};
  return tensor(d, packed_strides(d), DType::F32, p);
}
}  // namespace

SdpaLayout sdpa_fused_qkv(const SdpaShape& s) {
  DP_CHECK(s.heads_kv() == s.h && s.len_kv() == s.s_q && s.dim_v() == s.d,
           "the fused QKV layout needs as many key/value heads, keys and value dims as queries");
  const int64_t hd = s.h * s.d;  // one of q, k, v in a row
  const Dims qkv{s.s_q * 3 * hd, s.d, 3 * hd, 1};  // [B, S, 3, H, D] read as [B, H, S, D]
  const Dims o{s.s_q * hd, s.d, hd, 1};            // [B, S, H, D] read as [B, H, S, D]
  return {qkv, qkv, qkv, o};
}

PlanKey sdpa_fprop_key(const SdpaShape& s, const SdpaLayout& l, const SdpaOptions& o, bool training,
                       const std::array<const void*, 5>& ptrs, int device) {
  PlanKey k;
  k.op = GraphOp::SdpaFprop;
  k.math = MathMode::Tensor16;
  k.sdpa = o;
  k.device = device;
  k.tensors = {tensor(q_dims(s), l.q, s.dtype, ptrs[0]), tensor(k_dims(s), l.k, s.dtype, ptrs[1]),
               tensor(v_dims(s), l.v, s.dtype, ptrs[2]), tensor(o_dims(s), l.o, s.dtype, ptrs[3])};
  if (training) k.tensors.push_back(stats(s, ptrs[4]));
  return k;
}

PlanKey sdpa_bprop_key(const SdpaShape& s, const SdpaLayout& l, const SdpaOptions& o,
                       const std::array<const void*, 9>& ptrs, int device) {
  PlanKey k;
  k.op = GraphOp::SdpaBprop;
  k.math = MathMode::Tensor16;
  k.sdpa = o;
  k.device = device;
  k.tensors = {tensor(q_dims(s), l.q, s.dtype, ptrs[0]), tensor(k_dims(s), l.k, s.dtype, ptrs[1]),
               tensor(v_dims(s), l.v, s.dtype, ptrs[2]), tensor(o_dims(s), l.o, s.dtype, ptrs[3]),
               tensor(o_dims(s), l.o, s.dtype, ptrs[4]), stats(s, ptrs[5]),
               tensor(q_dims(s), l.q, s.dtype, ptrs[6]), tensor(k_dims(s), l.k, s.dtype, ptrs[7]),
               tensor(v_dims(s), l.v, s.dtype, ptrs[8])};
  return k;
}

}  // namespace dp::cuda
