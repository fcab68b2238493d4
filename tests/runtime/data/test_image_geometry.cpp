// Tests for runtime/data/image/geometry.h and resample.h as pure functions: torchvision's size
// and offset rules (Resize's int(size * long / short), CenterCrop's Python round), the
// RandomResizedCrop box (inside the image, deterministic per stream, area and ratio within range,
// the central fallback), the reduced-decode choice, Pillow 13's pass order, and the resize on
// images whose answer is known (a constant, an identity, a box average). Pixel equality with
// Pillow/torchvision themselves: tests/oracle/test_image_torchvision.py.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/data/image/geometry.h"
#include "runtime/data/image/resample.h"

namespace img = dp::data::image;

TEST(ImageGeometry, ResizedSizeIsTorchvisions) {
  EXPECT_EQ(img::resized_size(375, 500, 256), (std::pair<int, int>{256, 341}));  // int(256 * 500 / 375) = 341
  EXPECT_EQ(img::resized_size(500, 375, 256), (std::pair<int, int>{341, 256}));
  EXPECT_EQ(img::resized_size(300, 300, 256), (std::pair<int, int>{256, 256}));
  EXPECT_EQ(img::resized_size(333, 257, 100), (std::pair<int, int>{129, 100}));  // 100 * 333 / 257 = 129.57
}

TEST(ImageGeometry, CenterCropOffsetRoundsHalfToEven) {
  EXPECT_EQ(img::center_crop_offset(257, 224), 16);  // round(16.5) = 16 in Python
  EXPECT_EQ(img::center_crop_offset(259, 224), 18);  // round(17.5) = 18
  EXPECT_EQ(img::center_crop_offset(256, 224), 16);
  EXPECT_EQ(img::center_crop_offset(224, 224), 0);
}

TEST(ImageGeometry, RandomResizedCropBoxFitsAndIsDeterministic) {
  int fallbacks = 0;
  for (uint64_t i = 0; i < 500; ++i) {
    dp::Rng a(7, i), b(7, i);
    const img::CropBox x = img::random_resized_crop_box(375, 500, 0.08, 1.0, 3.0 / 4, 4.0 / 3, a);
    EXPECT_EQ(x, img::random_resized_crop_box(375, 500, 0.08, 1.0, 3.0 / 4, 4.0 / 3, b));
    ASSERT_GE(x.top, 0);
    ASSERT_GE(x.left, 0);
    ASSERT_LE(x.top + x.height, 375);
    ASSERT_LE(x.left + x.width, 500);
    const double area = static_cast<double>(x.height) * x.width / (375.0 * 500.0);
    const double ratio = static_cast<double>(x.width) / x.height;
    if (x.height == 375 && x.width == 500) {
      ++fallbacks;
      continue;
    }
    // Rounding w and h to pixels moves area and ratio a little beyond the drawn values.
    EXPECT_GE(area, 0.08 * 0.97) << i;
    EXPECT_LE(ratio, 4.0 / 3 * 1.03) << i;
    EXPECT_GE(ratio, 3.0 / 4 / 1.03) << i;
  }
  EXPECT_LT(fallbacks, 25);
}

TEST(ImageGeometry, RandomResizedCropFallsBackToTheClampedCentre) {
  // A 10 x 1000 strip: no crop of ratio <= 4/3 with area >= 50% fits, so every try fails; the
  // fallback is the centred h = 10, w = round(10 * 4 / 3) = 13.
  dp::Rng rng(1, 2);
  const img::CropBox b = img::random_resized_crop_box(10, 1000, 0.5, 1.0, 3.0 / 4, 4.0 / 3, rng);
  EXPECT_EQ(b, (img::CropBox{0, (1000 - 13) / 2, 10, 13}));
}

TEST(ImageGeometry, ReducedDecodeKeepsAtLeastTheOutputResolution) {
  // 4000 x 3000 resized to 256 (341 x 256): 1/8 leaves 500 x 375, still more than needed.
  EXPECT_EQ(img::plan_resize_center_crop(3000, 4000, 256, 224, 8).scale_denom, 8);
  EXPECT_EQ(img::plan_resize_center_crop(3000, 4000, 256, 224, 2).scale_denom, 2);  // capped
  EXPECT_EQ(img::plan_resize_center_crop(3000, 4000, 256, 224, 1).scale_denom, 1);
  EXPECT_EQ(img::plan_resize_center_crop(375, 500, 256, 224, 8).scale_denom, 1);   // 375 / 2 < 256
  // A 900-pixel crop to 224: 1/4 leaves 225 >= 224; 1/8 would leave 112.
  const img::SamplePlan p = img::plan_resized_crop(3000, 4000, img::CropBox{100, 200, 900, 1000}, 224, 8);
  EXPECT_EQ(p.scale_denom, 4);
  EXPECT_EQ(p.y.origin, 25);
  EXPECT_EQ(p.x.origin, 50);
  EXPECT_FLOAT_EQ(p.y.in1 - p.y.in0, 225.0f);
}

TEST(ImageGeometry, PillowRunsTheVerticalPassFirstWhenTheHeightShrinksMore) {
  auto plan = [](int in, int out) {
    img::AxisPlan p;
    p.in_size = in, p.out_size = out;
    return p;
  };
  EXPECT_FALSE(img::pillow_vertical_first(plan(500, 224), plan(375, 224)));  // 151 > 2 * 276? no
  EXPECT_TRUE(img::pillow_vertical_first(plan(94, 17), plan(330, 17)));     // 313 > 2 * 77
  EXPECT_FALSE(img::pillow_vertical_first(plan(100, 50), plan(150, 50)));   // 100 > 2 * 50? no (equal)
  EXPECT_FALSE(img::pillow_vertical_first(plan(10, 20), plan(10, 20)));     // upscaling
}

namespace {
img::AxisPlan whole(int in, int out) {
  img::AxisPlan p;
  p.in_size = in, p.in0 = 0, p.in1 = static_cast<float>(in), p.out_size = out, p.out_count = out;
  return p;
}
}  // namespace

TEST(ImageResample, WeightsAreNormalisedFixedPoint) {
  for (auto [in, out] : {std::pair{500, 224}, {224, 500}, {7, 3}, {100, 100}}) {
    const img::AxisCoeffs c = img::axis_coeffs(whole(in, out));
    for (int j = 0; j < out; ++j) {
      int64_t sum = 0;
      for (int t = 0; t < c.taps[j]; ++t) sum += c.weights[static_cast<size_t>(j) * c.ksize + t];
      EXPECT_NEAR(static_cast<double>(sum), 1 << 22, c.ksize) << in << "->" << out << " output " << j;
      EXPECT_GE(c.first[j], 0);
      EXPECT_LE(c.first[j] + c.taps[j], in);
    }
  }
}

TEST(ImageResample, ConstantStaysConstantAndIdentityCopies) {
  std::vector<uint8_t> src(37 * 53 * 3);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i % 3 == 0 ? 77 : (i % 3 == 1 ? 0 : 255));
  std::vector<uint8_t> out(3 * 11 * 19);
  img::resample_rgb(src.data(), 37, 53, 53 * 3, whole(53, 19), whole(37, 11), out.data());
  for (int i = 0; i < 11 * 19; ++i) {
    ASSERT_EQ(out[i], 77);
    ASSERT_EQ(out[11 * 19 + i], 0);
    ASSERT_EQ(out[2 * 11 * 19 + i], 255);
  }
  // The identity plan is a copy into planes; a window of it, the same pixels.
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 3);
  std::vector<uint8_t> same(3 * 37 * 53);
  img::resample_rgb(src.data(), 37, 53, 53 * 3, whole(53, 53), whole(37, 37), same.data());
  for (int y = 0; y < 37; ++y)
    for (int x = 0; x < 53; ++x)
      for (int c = 0; c < 3; ++c) ASSERT_EQ(same[(c * 37 + y) * 53 + x], src[(y * 53 + x) * 3 + c]);
}

TEST(ImageResample, HalvingIsTheWidenedTriangle) {
  // 4 x 1 -> 2 x 1: the triangle filter is widened to support 2, so output 0 (centre 1.0) weighs
  // pixels 0, 1, 2 by 0.75, 0.75, 0.25 and output 1 (centre 3.0) pixels 1, 2, 3 by 0.25, 0.75,
  // 0.75, each normalised by 1.75.
  const std::vector<uint8_t> src = {10, 10, 10, 20, 20, 20, 100, 100, 100, 201, 201, 201};
  std::vector<uint8_t> out(3 * 2);
  img::resample_rgb(src.data(), 1, 4, 12, whole(4, 2), whole(1, 1), out.data());
  EXPECT_EQ(out[0], 27);   // (7.5 + 15 + 25) / 1.75 = 27.14
  EXPECT_EQ(out[1], 132);  // (5 + 75 + 150.75) / 1.75 = 131.86
}
