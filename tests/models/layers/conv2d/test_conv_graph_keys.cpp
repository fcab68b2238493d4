// A Conv2d's plan keys on cuDNN's graph API (models/layers/conv2d/conv_graph_keys.h): which filter
// descriptions a pass is timed over, the tensors' dims, strides and alignment per pass and layout,
// the fused epilogue, the math mode, and that every key the layer makes validates. No GPU needed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "models/layers/conv2d/conv_graph_keys.h"

namespace dp::models {
namespace {

using Dims = std::array<int64_t, 4>;
using kernels::cpu::Conv2dDims;

// A 3x3 stride-2 pad-1 grouped convolution: x [8, 16, 9, 9] -> y [8, 32, 5, 5], 2 groups.
ConvGraphShape shape(DType dt, bool channels_last) {
  return {Conv2dDims{8, 16, 9, 9, 32, 3, 2, 1, 2, 5, 5}, dt, channels_last, 0};
}

TEST(ConvGraphKeys, FilterDescriptionsPerLayoutAndKernel) {
  const Conv2dDims d3 = shape(DType::BF16, true).d;
  EXPECT_EQ(filter_layouts(d3, false), std::vector<FilterLayout>{FilterLayout::Kcrs});
  EXPECT_EQ(filter_layouts(d3, true), (std::vector<FilterLayout>{FilterLayout::Kcrs, FilterLayout::Krsc}));
  Conv2dDims d1 = d3;
  d1.K = 1;  // 1x1: KCRS and KRSC are the same bytes
  EXPECT_EQ(filter_layouts(d1, true), std::vector<FilterLayout>{FilterLayout::Kcrs});
  Conv2dDims dw = d3;
  dw.groups = 16;  // depthwise: one channel per group
  EXPECT_EQ(filter_layouts(dw, true), std::vector<FilterLayout>{FilterLayout::Kcrs});
}

TEST(ConvGraphKeys, MathModeFollowsTheDataType) {
  EXPECT_EQ(conv_math(DType::F32), cuda::MathMode::Fma);
  EXPECT_EQ(conv_math(DType::BF16), cuda::MathMode::Tensor16);
  EXPECT_EQ(conv_math(DType::F16), cuda::MathMode::Tensor16);
  EXPECT_EQ(conv_math(DType::F32, /*tf32=*/true), cuda::MathMode::Tf32);  // train.tf32 = conv or all
  EXPECT_EQ(conv_math(DType::BF16, /*tf32=*/true), cuda::MathMode::Tensor16);
}

TEST(ConvGraphKeys, ForwardKeyChannelsLastWithBiasAndRelu) {
  alignas(256) static char buf[512];
  const cuda::PlanKey k = conv_fprop_key(shape(DType::BF16, true), FilterLayout::Krsc, cuda::kFuseBias | cuda::kFuseRelu,
                                         buf, buf + 256, buf + 2, buf + 16);
  ASSERT_EQ(k.tensors.size(), 4u);
  EXPECT_EQ(k.op, cuda::GraphOp::ConvFprop);
  EXPECT_EQ(k.math, cuda::MathMode::Tensor16);
  EXPECT_EQ(k.conv, (cuda::ConvGeometry{1, 2, 1}));
  EXPECT_EQ(k.tensors[0].dims, (Dims{8, 16, 9, 9}));
  EXPECT_EQ(k.tensors[0].strides, (Dims{16 * 81, 1, 9 * 16, 16}));  // NHWC
  EXPECT_EQ(k.tensors[1].dims, (Dims{32, 8, 3, 3}));
  EXPECT_EQ(k.tensors[1].strides, (Dims{72, 1, 24, 8}));  // KRSC
  EXPECT_EQ(k.tensors[2].dims, (Dims{1, 32, 1, 1}));
  EXPECT_EQ(k.tensors[2].strides, (Dims{32, 1, 32, 32}));  // the bias in the activations' layout
  EXPECT_EQ(k.tensors[2].align, 2);
  EXPECT_EQ(k.tensors[3].dims, (Dims{8, 32, 5, 5}));
  EXPECT_EQ(k.tensors[3].strides, (Dims{32 * 25, 1, 5 * 32, 32}));
  for (const auto& t : k.tensors) EXPECT_EQ(t.dtype, DType::BF16);
  EXPECT_EQ(cuda::validate_plan_key(k), "");
  EXPECT_EQ(filter_layout_of(k), FilterLayout::Krsc);
}

TEST(ConvGraphKeys, ForwardKeyNchwWithoutEpilogue) {
  const cuda::PlanKey k = conv_fprop_key(shape(DType::F32, false), FilterLayout::Kcrs, cuda::kFuseNone, nullptr,
                                         nullptr, nullptr, nullptr);
  ASSERT_EQ(k.tensors.size(), 3u);
  EXPECT_EQ(k.math, cuda::MathMode::Fma);
  EXPECT_EQ(k.tensors[0].strides, (Dims{16 * 81, 81, 9, 1}));
  EXPECT_EQ(k.tensors[1].strides, (Dims{72, 9, 3, 1}));
  EXPECT_EQ(k.tensors[2].dims, (Dims{8, 32, 5, 5}));
  EXPECT_EQ(cuda::validate_plan_key(k), "");
  EXPECT_EQ(filter_layout_of(k), FilterLayout::Kcrs);
}

TEST(ConvGraphKeys, GradientKeysOrderTheirTensorsAsTheOpsTake) {
  const ConvGraphShape s = shape(DType::F16, true);
  const cuda::PlanKey dgrad = conv_dgrad_key(s, FilterLayout::Kcrs, nullptr, nullptr, nullptr);
  EXPECT_EQ(dgrad.op, cuda::GraphOp::ConvDgrad);
  EXPECT_EQ(dgrad.tensors[0].dims, (Dims{8, 32, 5, 5}));  // dy
  EXPECT_EQ(dgrad.tensors[1].dims, (Dims{32, 8, 3, 3}));  // w
  EXPECT_EQ(dgrad.tensors[2].dims, (Dims{8, 16, 9, 9}));  // dx
  EXPECT_EQ(cuda::validate_plan_key(dgrad), "");
  EXPECT_EQ(filter_layout_of(dgrad), FilterLayout::Kcrs);
  const cuda::PlanKey wgrad = conv_wgrad_key(s, FilterLayout::Krsc, nullptr, nullptr, nullptr);
  EXPECT_EQ(wgrad.op, cuda::GraphOp::ConvWgrad);
  EXPECT_EQ(wgrad.tensors[0].dims, (Dims{8, 16, 9, 9}));  // x
  EXPECT_EQ(wgrad.tensors[1].dims, (Dims{8, 32, 5, 5}));  // dy
  EXPECT_EQ(wgrad.tensors[2].dims, (Dims{32, 8, 3, 3}));  // dw
  EXPECT_EQ(cuda::validate_plan_key(wgrad), "");
  EXPECT_EQ(filter_layout_of(wgrad), FilterLayout::Krsc);
}

TEST(ConvGraphKeys, TheTwoFilterDescriptionsAreDifferentKeys) {
  const ConvGraphShape s = shape(DType::BF16, true);
  EXPECT_NE(conv_dgrad_key(s, FilterLayout::Kcrs, nullptr, nullptr, nullptr),
            conv_dgrad_key(s, FilterLayout::Krsc, nullptr, nullptr, nullptr));
  ConvGraphShape other_batch = s;
  other_batch.d.N = 4;
  EXPECT_NE(conv_dgrad_key(s, FilterLayout::Kcrs, nullptr, nullptr, nullptr),
            conv_dgrad_key(other_batch, FilterLayout::Kcrs, nullptr, nullptr, nullptr));
}

}  // namespace
}  // namespace dp::models
