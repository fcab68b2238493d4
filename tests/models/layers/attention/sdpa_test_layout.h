// defines: contiguous_bhsd, the SDPA layout of q, k, v and o as four separate contiguous
// [B, H, S, D] tensors. The product runs GPT's fused QKV rows only (sdpa_fused_qkv); the tests use
// this layout for the shapes those rows cannot hold (grouped-query attention, other key lengths and
// value dims) and to run cuDNN's fused attention over plain tensors.
#pragma once
#include "models/layers/attention/sdpa_keys.h"

namespace dp::cuda::test {

inline SdpaLayout contiguous_bhsd(const SdpaShape& s) {
  return {packed_strides({s.b, s.h, s.s_q, s.d}), packed_strides({s.b, s.heads_kv(), s.len_kv(), s.d}),
          packed_strides({s.b, s.heads_kv(), s.len_kv(), s.dim_v()}), packed_strides({s.b, s.h, s.s_q, s.dim_v()})};
}

}  // namespace dp::cuda::test
