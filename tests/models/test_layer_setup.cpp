// Setup-time shape rules: output shapes, and the exact UserError for each invalid input shape.
#include <gtest/gtest.h>

#include "tests/models/layer_harness.h"

namespace dp::test {
namespace {

using A = std::map<std::string, ArgValue>;
ArgValue I(int64_t v) { return ArgValue{v}; }

Shape out_shape(const std::string& type, const A& args, const std::vector<Shape>& in) {
  return make_layer(type, args, "l")->setup(in);
}

std::string setup_error(const std::string& type, const A& args, const std::vector<Shape>& in,
                        const std::string& name) {
  try {
    make_layer(type, args, name)->setup(in);
  } catch (const UserError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(LayerSetup, OutputShapes) {
  EXPECT_EQ(out_shape("linear", {{"out_features", I(10)}}, {{84}}), (Shape{10}));
  // floor((7 + 2 - 3) / 2) + 1 = 4
  EXPECT_EQ(out_shape("conv2d", {{"out_channels", I(6)}, {"kernel", I(3)}, {"stride", I(2)}, {"padding", I(1)}},
                      {{2, 7, 8}}),
            (Shape{6, 4, 4}));
  EXPECT_EQ(out_shape("conv2d", {{"out_channels", I(6)}, {"kernel", I(5)}}, {{1, 28, 28}}), (Shape{6, 24, 24}));
  EXPECT_EQ(out_shape("batchnorm2d", {}, {{3, 5, 5}}), (Shape{3, 5, 5}));
  EXPECT_EQ(out_shape("maxpool2d", {{"kernel", I(2)}}, {{3, 7, 7}}), (Shape{3, 3, 3}));  // floor mode
  EXPECT_EQ(out_shape("maxpool2d", {{"kernel", I(3)}, {"stride", I(2)}, {"padding", I(1)}}, {{64, 112, 112}}),
            (Shape{64, 56, 56}));
  EXPECT_EQ(out_shape("avgpool2d", {{"kernel", I(3)}, {"stride", I(1)}, {"padding", I(1)}}, {{2, 5, 5}}),
            (Shape{2, 5, 5}));
  EXPECT_EQ(out_shape("global_avgpool", {}, {{512, 7, 7}}), (Shape{512, 1, 1}));
  EXPECT_EQ(out_shape("flatten", {}, {{16, 5, 5}}), (Shape{400}));
  EXPECT_EQ(out_shape("relu", {}, {{3, 2}}), (Shape{3, 2}));
  EXPECT_EQ(out_shape("dropout", {}, {{7}}), (Shape{7}));
  EXPECT_EQ(out_shape("add", {}, {{4, 2, 2}, {4, 2, 2}}), (Shape{4, 2, 2}));
}

TEST(LayerSetup, ConvChannelsNotDivisibleByGroups) {
  EXPECT_EQ(setup_error("conv2d", {{"out_channels", I(4)}, {"kernel", I(3)}, {"groups", I(2)}}, {{3, 8, 8}}, "conv2"),
            "layer 'conv2' (conv2d): input has 3 channels, not divisible by groups=2");
  EXPECT_EQ(setup_error("conv2d", {{"out_channels", I(5)}, {"kernel", I(3)}, {"groups", I(2)}}, {{4, 8, 8}}, "conv2"),
            "layer 'conv2' (conv2d): out_channels=5 is not divisible by groups=2");
}

TEST(LayerSetup, ConvKernelLargerThanInput) {
  EXPECT_EQ(setup_error("conv2d", {{"out_channels", I(4)}, {"kernel", I(5)}}, {{1, 3, 8}}, "c"),
            "layer 'c' (conv2d): kernel 5 with padding 0 does not fit the 3x8 input (output would be 0x4)");
}

TEST(LayerSetup, WrongInputRank) {
  EXPECT_EQ(setup_error("conv2d", {{"out_channels", I(4)}, {"kernel", I(3)}}, {{784}}, "c1"),
            "layer 'c1' (conv2d): input per-sample shape is [784], expected 3 dimensions [C, H, W]");
  EXPECT_EQ(setup_error("batchnorm2d", {}, {{10}}, "bn"),
            "layer 'bn' (batchnorm2d): input per-sample shape is [10], expected 3 dimensions [C, H, W]");
}

TEST(LayerSetup, LinearNeedsFlatInput) {
  EXPECT_EQ(setup_error("linear", {{"out_features", I(10)}}, {{16, 5, 5}}, "fc1"),
            "layer 'fc1' (linear): input per-sample shape is [16, 5, 5], but linear takes [in_features] or "
            "[T, in_features] (applied to the last dimension); add a 'flatten' layer before it");
}

TEST(LayerSetup, PoolPaddingAtMostHalfKernel) {
  EXPECT_EQ(setup_error("maxpool2d", {{"kernel", I(2)}, {"padding", I(2)}}, {{1, 8, 8}}, "p"),
            "layer 'p' (maxpool2d): padding 2 is more than half the kernel 2");
}

TEST(LayerSetup, AddNeedsIdenticalShapes) {
  EXPECT_EQ(setup_error("add", {}, {{64, 8, 8}, {128, 4, 4}}, "res1"),
            "layer 'res1' (add): inputs have different shapes [64, 8, 8] and [128, 4, 4]; add needs identical shapes");
}

}  // namespace
}  // namespace dp::test
