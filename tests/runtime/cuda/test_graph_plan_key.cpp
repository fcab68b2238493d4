// The cuDNN graph-API plan key (runtime/cuda/graph_plan_key.h): equality and hashing (every field
// that changes a plan changes the key), the printable form, the strides helpers, the alignment,
// the math modes' deselected notes, and validate_plan_key's checks per op. No GPU needed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <unordered_set>

#include "runtime/cuda/graph_plan_key.h"

namespace dp::cuda {
namespace {

using ::testing::HasSubstr;
using Dims = std::array<int64_t, 4>;

GraphTensor packed(Dims d, DType t = DType::BF16) { return {d, packed_strides(d), t, 16}; }
GraphTensor nhwc(Dims d, DType t = DType::BF16) { return {d, channels_last_strides(d), t, 16}; }

// A 3x3 pad-1 convolution of x [2, 8, 6, 6] into 4 channels, NHWC bf16, bias and ReLU fused.
PlanKey fprop() {
  PlanKey k;
  k.op = GraphOp::ConvFprop;
  k.math = MathMode::Tensor16;
  k.fusion = kFuseBias | kFuseRelu;
  k.conv = {1, 1, 1};
  k.tensors = {nhwc({2, 8, 6, 6}), nhwc({4, 8, 3, 3}), nhwc({1, 4, 1, 1}), nhwc({2, 4, 6, 6})};
  return k;
}

TEST(GraphPlanKey, StridesOfPackedAndChannelsLastLayouts) {
  EXPECT_EQ(packed_strides({2, 3, 4, 5}), (Dims{60, 20, 5, 1}));
  EXPECT_EQ(channels_last_strides({2, 3, 4, 5}), (Dims{60, 1, 15, 3}));
  // A filter [K, C, R, S] channels last is KRSC: C innermost, then S, R, K.
  EXPECT_EQ(channels_last_strides({64, 32, 3, 3}), (Dims{288, 1, 96, 32}));
}

TEST(GraphPlanKey, ByteAlignmentIsCappedAtSixteen) {
  alignas(64) static char buf[64];
  EXPECT_EQ(byte_alignment(buf), 16);
  EXPECT_EQ(byte_alignment(buf + 2), 2);
  EXPECT_EQ(byte_alignment(buf + 4), 4);
  EXPECT_EQ(byte_alignment(buf + 8), 8);
  EXPECT_EQ(byte_alignment(buf + 1), 1);
  EXPECT_EQ(byte_alignment(buf + 48), 16);
  EXPECT_EQ(byte_alignment(nullptr), 16);
}

TEST(GraphPlanKey, EqualKeysHashEqual) {
  const PlanKey a = fprop(), b = fprop();
  EXPECT_EQ(a, b);
  EXPECT_EQ(PlanKeyHash{}(a), PlanKeyHash{}(b));
}

TEST(GraphPlanKey, EveryFieldThatChangesThePlanChangesTheKeyAndItsHash) {
  const PlanKey base = fprop();
  const std::vector<std::pair<const char*, std::function<void(PlanKey&)>>> changes = {
      {"op", [](PlanKey& k) { k.op = GraphOp::ConvDgrad; }},
      {"math", [](PlanKey& k) { k.math = MathMode::Fma; }},
      {"fusion", [](PlanKey& k) { k.fusion = kFuseBias; }},
      {"pad", [](PlanKey& k) { k.conv.pad = 2; }},
      {"stride", [](PlanKey& k) { k.conv.stride = 2; }},
      {"dilation", [](PlanKey& k) { k.conv.dilation = 2; }},
      {"causal", [](PlanKey& k) { k.sdpa.causal = false; }},
      {"scale", [](PlanKey& k) { k.sdpa.scale = 0.125f; }},
      {"device", [](PlanKey& k) { k.device = 1; }},
      {"batch", [](PlanKey& k) { k.tensors[0].dims[0] = 3; }},
      {"layout", [](PlanKey& k) { k.tensors[1].strides = packed_strides(k.tensors[1].dims); }},
      {"dtype", [](PlanKey& k) { k.tensors[3].dtype = DType::F16; }},
      {"alignment", [](PlanKey& k) { k.tensors[2].align = 2; }},
      {"tensor count", [](PlanKey& k) { k.tensors.pop_back(); }},
  };
  std::unordered_set<size_t> hashes{PlanKeyHash{}(base)};
  for (const auto& [what, change] : changes) {
    PlanKey k = base;
    change(k);
    EXPECT_NE(k, base) << what;
    EXPECT_TRUE(hashes.insert(PlanKeyHash{}(k)).second) << what << ": hash collides with an earlier key";
  }
}

TEST(GraphPlanKey, ChoiceKeysCompareTiersAndOrder) {
  PlanKey a = fprop(), b = fprop();
  b.tensors[1].strides = packed_strides(b.tensors[1].dims);
  const PlanChoiceKey ab{{{a, b}}}, ba{{{b, a}}}, tiers{{{a}, {b}}};
  EXPECT_EQ(ab, (PlanChoiceKey{{{a, b}}}));
  EXPECT_NE(ab, ba);
  EXPECT_NE(ab, tiers);
  EXPECT_NE(PlanChoiceKeyHash{}(ab), PlanChoiceKeyHash{}(ba));
  EXPECT_NE(PlanChoiceKeyHash{}(ab), PlanChoiceKeyHash{}(tiers));
  EXPECT_THAT(ab.str(), HasSubstr("(1 of 2 descriptions)"));
}

TEST(GraphPlanKey, StrNamesTheOpTensorsLayoutsAndEpilogue) {
  PlanKey k = fprop();
  k.tensors[1].strides = packed_strides(k.tensors[1].dims);
  k.tensors[2].align = 2;
  EXPECT_EQ(k.str(),
            "conv_fprop bf16 x[2,8,6,6] NHWC w[4,8,3,3] bias[1,4,1,1] NHWC align 2 y[2,4,6,6] NHWC pad 1 stride 1 +bias "
            "+relu tensor16 math");
}

TEST(GraphPlanKey, FmaRulesOutTensorCoresAndDownConversionEveryModeReducedPrecision) {
  EXPECT_EQ(deselected_notes(MathMode::Fma),
            (std::vector<NumericNote>{NumericNote::TensorCore, NumericNote::DownConvertInputs,
                                      NumericNote::ReducedPrecisionReduction}));
  EXPECT_EQ(deselected_notes(MathMode::Tf32), std::vector<NumericNote>{NumericNote::ReducedPrecisionReduction});
  EXPECT_EQ(deselected_notes(MathMode::Tensor16), std::vector<NumericNote>{NumericNote::ReducedPrecisionReduction});
}

TEST(GraphPlanKey, ValidConvKeysPass) {
  EXPECT_EQ(validate_plan_key(fprop()), "");
  PlanKey dgrad;
  dgrad.op = GraphOp::ConvDgrad;
  dgrad.math = MathMode::Fma;
  dgrad.conv = {1, 2, 1};  // stride 2: 7x7 -> 4x4; groups 2 (4 channels, 2 per group)
  dgrad.tensors = {packed({2, 6, 4, 4}, DType::F32), packed({6, 2, 3, 3}, DType::F32), packed({2, 4, 7, 7}, DType::F32)};
  EXPECT_EQ(validate_plan_key(dgrad), "");
  PlanKey wgrad = dgrad;
  wgrad.op = GraphOp::ConvWgrad;
  wgrad.tensors = {dgrad.tensors[2], dgrad.tensors[0], dgrad.tensors[1]};
  EXPECT_EQ(validate_plan_key(wgrad), "");
}

TEST(GraphPlanKey, ConvKeysWithWrongShapesSayWhat) {
  PlanKey k = fprop();
  k.tensors[3].dims = {2, 4, 5, 5};
  EXPECT_EQ(validate_plan_key(k), "conv_fprop: y is [2,4,5,5], the convolution gives [2,4,6,6]");
  k = fprop();
  k.tensors[2].dims = {1, 5, 1, 1};
  EXPECT_EQ(validate_plan_key(k), "conv_fprop: bias is [1,5,1,1], expected [1,4,1,1]");
  k = fprop();
  k.fusion = kFuseRelu;  // no bias tensor expected, four given
  EXPECT_EQ(validate_plan_key(k), "conv_fprop: 4 tensors, expected 3");
  k = fprop();
  k.tensors[1].dims = {4, 3, 3, 3};
  EXPECT_EQ(validate_plan_key(k), "conv_fprop: x has 8 channels, not a multiple of the filter's 3 per group");
  k = fprop();
  k.tensors[1].dims = {3, 4, 3, 3};  // 2 groups of 4 channels, 3 filters
  EXPECT_EQ(validate_plan_key(k), "conv_fprop: 3 filters do not split into 2 groups");
  k = fprop();
  k.math = MathMode::Fma;
  EXPECT_EQ(validate_plan_key(k), "conv_fprop: fma math for bf16 data (16-bit data takes tensor16)");
  k = fprop();
  k.tensors[0].dtype = DType::F32;
  EXPECT_EQ(validate_plan_key(k), "conv_fprop: tensor16 math for f32 data (f32 takes fma or tf32)");
  k = fprop();
  k.tensors[2].align = 3;
  EXPECT_EQ(validate_plan_key(k), "conv_fprop: alignment 3 (a power of two, at most 16)");
  k = fprop();
  k.tensors[0].strides[1] = 0;
  EXPECT_THAT(validate_plan_key(k), HasSubstr("(each must be >= 1)"));
  k = fprop();
  k.op = GraphOp::ConvDgrad;
  EXPECT_EQ(validate_plan_key(k), "conv_dgrad: 4 tensors, expected 3");
  k.tensors.erase(k.tensors.begin() + 2);
  EXPECT_EQ(validate_plan_key(k), "conv_dgrad: a fused epilogue is only for conv_fprop");
}

// The deterministic attention backward's workspace (cudnn-frontend 1.32 on Hopper before cuDNN
// 9.25: dP in 16 bits over sequence lengths rounded up to 64, and the rows' f32 softmax sums), and
// its limit: the cap for every other op, for the attention backward the larger of the cap and the
// need with an eighth more (else every engine would be deselected at GPT-2's batch 16).
TEST(GraphPlanKey, TheAttentionBackwardsWorkspaceLimitIsItsNeedWhenAboveTheCap) {
  EXPECT_EQ(sdpa_bprop_workspace_bytes(16, 12, 1024, 1024), 403'439'616);  // GPT-2 124M, batch 16
  EXPECT_EQ(sdpa_bprop_workspace_bytes(1, 1, 65, 1), 128 * 64 * 2 + 65 * 4);
  PlanKey k;
  k.op = GraphOp::SdpaBprop;
  k.math = MathMode::Tensor16;
  for (int i = 0; i < 9; ++i)
    k.tensors.push_back(i == 5 ? packed({16, 12, 1024, 1}, DType::F32) : packed({16, 12, 1024, 64}));
  const size_t cap = size_t{256} << 20, need = 403'439'616;
  EXPECT_EQ(plan_workspace_limit(k, cap), need + need / 8);
  EXPECT_EQ(plan_workspace_limit(k, size_t{1} << 30), size_t{1} << 30);
  EXPECT_EQ(plan_workspace_limit(fprop(), cap), cap);
  k.op = GraphOp::SdpaFprop;
  EXPECT_EQ(plan_workspace_limit(k, cap), cap);
}

}  // namespace
}  // namespace dp::cuda
