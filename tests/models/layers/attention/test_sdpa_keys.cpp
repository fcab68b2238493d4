// Scaled-dot-product attention's graph-API plan keys (models/layers/attention/sdpa_keys.h): the
// layouts' strides (GPT's fused QKV rows, and the tests' contiguous one), the forward and backward
// keys' tensors, and what validate_plan_key refuses (what cuDNN's fused attention cannot run). No
// GPU needed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "models/layers/attention/sdpa_keys.h"
#include "tests/models/layers/attention/sdpa_test_layout.h"

namespace dp::cuda {
namespace {

using ::testing::HasSubstr;
using Dims = std::array<int64_t, 4>;

// GPT-2 small's attention at batch 4, context 1024: 12 heads of 64.
SdpaShape gpt2() {
  SdpaShape s;
  s.b = 4, s.h = 12, s.s_q = 1024, s.d = 64;
  return s;
}

// The tests' layout for shapes the fused rows cannot hold (sdpa_test_layout.h).
TEST(SdpaKeys, ContiguousLayoutIsPackedBhsd) {
  const SdpaLayout l = test::contiguous_bhsd(gpt2());
  EXPECT_EQ(l.q, (Dims{12 * 1024 * 64, 1024 * 64, 64, 1}));
  EXPECT_EQ(l.o, l.q);
}

TEST(SdpaKeys, FusedQkvRowsAreReadAsBhsd) {
  const SdpaLayout l = sdpa_fused_qkv(gpt2());
  // Element (b, h, s, d) of q is at b*S*3*H*D + s*3*H*D + h*D + d of the [B, S, 3, H, D] buffer.
  EXPECT_EQ(l.q, (Dims{1024 * 3 * 768, 64, 3 * 768, 1}));
  EXPECT_EQ(l.k, l.q);  // k and v: the same strides from pointers +H*D and +2*H*D
  EXPECT_EQ(l.v, l.q);
  EXPECT_EQ(l.o, (Dims{1024 * 768, 64, 768, 1}));
  SdpaShape gqa = gpt2();
  gqa.h_kv = 4;
  EXPECT_THROW(sdpa_fused_qkv(gqa), DpError);
}

TEST(SdpaKeys, ForwardKeyHasStatsOnlyWhenTraining) {
  const SdpaShape s = gpt2();
  const SdpaOptions o{true, 0.125f};
  const PlanKey train = sdpa_fprop_key(s, sdpa_fused_qkv(s), o, true, {}, 0);
  ASSERT_EQ(train.tensors.size(), 5u);
  EXPECT_EQ(train.tensors[4].dims, (Dims{4, 12, 1024, 1}));
  EXPECT_EQ(train.tensors[4].dtype, DType::F32);
  EXPECT_EQ(train.math, MathMode::Tensor16);
  EXPECT_EQ(validate_plan_key(train), "");
  const PlanKey eval = sdpa_fprop_key(s, sdpa_fused_qkv(s), o, false, {}, 0);
  EXPECT_EQ(eval.tensors.size(), 4u);
  EXPECT_EQ(validate_plan_key(eval), "");
  EXPECT_NE(train, eval);
  EXPECT_THAT(train.str(), HasSubstr("sdpa_fprop bf16 q[4,12,1024,64] strides [2359296,64,2304,1]"));
  EXPECT_THAT(train.str(), HasSubstr("stats[4,12,1024,1] f32 causal scale 0.125 tensor16 math"));
}

TEST(SdpaKeys, BackwardKeyPairsEachGradientWithItsTensor) {
  const SdpaShape s = gpt2();
  alignas(16) static char buf[32];
  std::array<const void*, 9> ptrs{};
  ptrs[6] = buf + 2;  // dq only 2-byte aligned
  const PlanKey k = sdpa_bprop_key(s, test::contiguous_bhsd(s), {true, 0.125f}, ptrs, 0);
  ASSERT_EQ(k.tensors.size(), 9u);
  EXPECT_EQ(k.tensors[6].dims, k.tensors[0].dims);
  EXPECT_EQ(k.tensors[6].align, 2);
  EXPECT_EQ(k.tensors[5].dtype, DType::F32);
  EXPECT_EQ(validate_plan_key(k), "");
}

TEST(SdpaKeys, GroupedQueryAttentionAndOtherLengthsValidate) {
  SdpaShape s = gpt2();
  s.h_kv = 4, s.s_kv = 512, s.d_v = 128;
  const PlanKey k = sdpa_fprop_key(s, test::contiguous_bhsd(s), {false, 0.125f}, true, {}, 0);
  EXPECT_EQ(k.tensors[1].dims, (Dims{4, 4, 512, 64}));
  EXPECT_EQ(k.tensors[2].dims, (Dims{4, 4, 512, 128}));
  EXPECT_EQ(k.tensors[3].dims, (Dims{4, 12, 1024, 128}));
  EXPECT_EQ(validate_plan_key(k), "");
}

// On the product's layout (GPT's fused QKV rows) wherever the shape fits in it.
TEST(SdpaKeys, WhatFusedAttentionCannotRunIsRefusedWithTheReason) {
  SdpaShape s = gpt2();
  s.dtype = DType::F32;
  EXPECT_EQ(validate_plan_key(sdpa_fprop_key(s, sdpa_fused_qkv(s), {}, true, {}, 0)),
            "sdpa_fprop: cuDNN's fused attention takes bf16 or f16, not f32");
  s = gpt2();
  s.d = 36;
  EXPECT_EQ(validate_plan_key(sdpa_fprop_key(s, sdpa_fused_qkv(s), {}, true, {}, 0)),
            "sdpa_fprop: head dim 36 (cuDNN's fused attention needs a multiple of 8, at most 256)");
  s.d = 320;
  EXPECT_THAT(validate_plan_key(sdpa_fprop_key(s, sdpa_fused_qkv(s), {}, true, {}, 0)), HasSubstr("head dim 320"));
  s = gpt2();
  s.h_kv = 5;  // grouped-query attention: not in the fused QKV rows
  EXPECT_EQ(validate_plan_key(sdpa_fprop_key(s, test::contiguous_bhsd(s), {}, true, {}, 0)),
            "sdpa_fprop: 12 query heads are not a multiple of 5 key heads");
  s = gpt2();
  EXPECT_EQ(validate_plan_key(sdpa_fprop_key(s, sdpa_fused_qkv(s), {true, 0.0f}, true, {}, 0)),
            "sdpa_fprop: scale 0 must be finite and > 0");
  PlanKey k = sdpa_fprop_key(s, sdpa_fused_qkv(s), {}, true, {}, 0);
  k.tensors[0].strides = {64, 1024 * 64 * 12, 1, 1024};  // head dim not contiguous
  k.tensors[0].strides[3] = 2;
  EXPECT_EQ(validate_plan_key(k), "sdpa_fprop: the head dim must have stride 1");
  k = sdpa_fprop_key(s, sdpa_fused_qkv(s), {}, true, {}, 0);
  k.tensors[4].dtype = DType::BF16;
  EXPECT_EQ(validate_plan_key(k), "sdpa_fprop: stats is bf16 [4,12,1024,1], expected f32 [4,12,1024,1]");
  k = sdpa_bprop_key(s, sdpa_fused_qkv(s), {}, {}, 0);
  k.tensors[8].dims[3] = 32;
  EXPECT_EQ(validate_plan_key(k), "sdpa_bprop: dv is [4,12,1024,32], expected v's shape [4,12,1024,64]");
  k = sdpa_bprop_key(s, sdpa_fused_qkv(s), {}, {}, 0);
  k.tensors.pop_back();
  EXPECT_EQ(validate_plan_key(k), "sdpa_bprop: 8 tensors, expected 9");
  k = sdpa_bprop_key(s, sdpa_fused_qkv(s), {}, {}, 0);
  k.math = MathMode::Fma;
  EXPECT_EQ(validate_plan_key(k), "sdpa_bprop: fma math, expected tensor16");
}

}  // namespace
}  // namespace dp::cuda
