// Tests for runtime/data/transform.h: crop/flip against an independent pad-crop-flip
// reference, pixel multiset properties, normalisation values, determinism and coin balance.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "runtime/data/transform.h"

using dp::data::apply_transform;
using dp::data::augment_choice;
using dp::data::check_transform;
using dp::data::Transform;

namespace {

// A (C, H, W) image with distinct values in [1, C*H*W]: every output value names its source.
std::vector<float> numbered(int C, int H, int W) {
  std::vector<float> v(C * H * W);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i + 1);
  return v;
}

// torchvision's way, written out: zero-pad by P, crop (H, W) at (dy, dx), mirror if flip.
std::vector<float> reference(const std::vector<float>& in, int C, int H, int W, int P, int dy, int dx, bool flip) {
  const int PH = H + 2 * P, PW = W + 2 * P;
  std::vector<float> padded(C * PH * PW, 0.0f);
  for (int c = 0; c < C; ++c)
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x) padded[(c * PH + y + P) * PW + x + P] = in[(c * H + y) * W + x];
  std::vector<float> out(C * H * W);
  for (int c = 0; c < C; ++c)
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x) out[(c * H + y) * W + x] = padded[(c * PH + y + dy) * PW + x + dx];
  if (flip)
    for (int c = 0; c < C; ++c)
      for (int y = 0; y < H; ++y) std::reverse(out.begin() + (c * H + y) * W, out.begin() + (c * H + y + 1) * W);
  return out;
}

}  // namespace

TEST(DataTransform, IdentityCopies) {
  Transform t;
  EXPECT_TRUE(t.is_identity());
  auto in = numbered(2, 3, 4);
  std::vector<float> out(in.size(), -1.0f);
  apply_transform(t, {2, 3, 4}, 1, 2, 3, in.data(), out.data());
  EXPECT_EQ(out, in);
}

TEST(DataTransform, CropAndFlipMatchPadCropFlipReference) {
  const int C = 3, H = 5, W = 7, P = 2;
  Transform t;
  t.crop_padding = P;
  t.hflip = true;
  auto in = numbered(C, H, W);
  std::set<int> dys, dxs;
  int flips = 0;
  for (int64_t index = 0; index < 300; ++index) {
    auto a = augment_choice(t, 5, 1, index);
    ASSERT_TRUE(a.dy >= 0 && a.dy <= 2 * P && a.dx >= 0 && a.dx <= 2 * P);
    dys.insert(a.dy);
    dxs.insert(a.dx);
    flips += a.flip;
    std::vector<float> out(in.size());
    apply_transform(t, {C, H, W}, 5, 1, index, in.data(), out.data());
    ASSERT_EQ(out, reference(in, C, H, W, P, a.dy, a.dx, a.flip)) << "index " << index;
    // Multiset: the nonzero outputs are distinct input values; the zeros are exactly the
    // positions that fell into the padding.
    const int64_t kept = static_cast<int64_t>(C) * (H - std::abs(a.dy - P)) * (W - std::abs(a.dx - P));
    EXPECT_EQ(std::count(out.begin(), out.end(), 0.0f), C * H * W - kept);
    std::vector<float> nz;
    for (float v : out)
      if (v != 0.0f) nz.push_back(v);
    std::sort(nz.begin(), nz.end());
    EXPECT_EQ(std::adjacent_find(nz.begin(), nz.end()), nz.end());
  }
  EXPECT_EQ(dys.size(), 5u);  // every offset in [0, 4] occurs
  EXPECT_EQ(dxs.size(), 5u);
  EXPECT_GT(flips, 110);  // 150 expected, sd ~ 8.7
  EXPECT_LT(flips, 190);
}

TEST(DataTransform, FlipAloneKeepsThePixelMultisetAndMirrors) {
  Transform t;
  t.hflip = true;
  auto in = numbered(2, 3, 4);
  int flipped = 0;
  for (int64_t index = 0; index < 40; ++index) {
    std::vector<float> out(in.size());
    apply_transform(t, {2, 3, 4}, 9, 0, index, in.data(), out.data());
    auto a = augment_choice(t, 9, 0, index);
    EXPECT_EQ(a.dy, 0);
    EXPECT_EQ(a.dx, 0);
    std::vector<float> s1 = in, s2 = out;
    std::sort(s1.begin(), s1.end());
    std::sort(s2.begin(), s2.end());
    EXPECT_EQ(s1, s2);
    if (a.flip) {
      ++flipped;
      EXPECT_EQ(out[0], in[3]);      // (c0, y0, x0) <- (c0, y0, x3)
      EXPECT_EQ(out[13], in[14]);    // (c1, y0, x1) <- (c1, y0, x2)
    } else {
      EXPECT_EQ(out, in);
    }
  }
  EXPECT_GT(flipped, 0);
  EXPECT_LT(flipped, 40);
}

TEST(DataTransform, ChoicesAreKeyedBySeedEpochAndIndex) {
  Transform t;
  t.crop_padding = 4;
  t.hflip = true;
  auto same = [](auto a, auto b) { return a.dy == b.dy && a.dx == b.dx && a.flip == b.flip; };
  int diff_epoch = 0, diff_seed = 0;
  for (int64_t i = 0; i < 100; ++i) {
    EXPECT_TRUE(same(augment_choice(t, 1, 2, i), augment_choice(t, 1, 2, i)));
    diff_epoch += !same(augment_choice(t, 1, 2, i), augment_choice(t, 1, 3, i));
    diff_seed += !same(augment_choice(t, 1, 2, i), augment_choice(t, 2, 2, i));
  }
  EXPECT_GT(diff_epoch, 80);  // the same choice by chance: 1/162 per sample
  EXPECT_GT(diff_seed, 80);
  // Turning flips on or off does not move the crops.
  Transform crop_only = t;
  crop_only.hflip = false;
  for (int64_t i = 0; i < 50; ++i) {
    EXPECT_EQ(augment_choice(t, 1, 2, i).dy, augment_choice(crop_only, 1, 2, i).dy);
    EXPECT_EQ(augment_choice(t, 1, 2, i).dx, augment_choice(crop_only, 1, 2, i).dx);
    EXPECT_FALSE(augment_choice(crop_only, 1, 2, i).flip);
  }
}

TEST(DataTransform, NormalisesPerChannelAfterPadding) {
  Transform t;
  t.mean = {0.5f, 0.25f};
  t.std = {0.5f, 2.0f};
  std::vector<float> in = {0.0f, 1.0f, 0.5f, 0.75f,   // channel 0 (2 x 2)
                           0.25f, 1.0f, 0.0f, 0.5f};  // channel 1
  std::vector<float> out(8);
  apply_transform(t, {2, 2, 2}, 0, 0, 0, in.data(), out.data());
  EXPECT_EQ(out, (std::vector<float>{-1.0f, 1.0f, 0.0f, 0.5f, 0.0f, 0.375f, -0.125f, 0.125f}));
  // Padded pixels are zeros before normalisation: (0 - mean) / std afterwards.
  t.crop_padding = 1;
  for (int64_t index = 0; index < 50; ++index) {
    auto a = augment_choice(t, 0, 0, index);
    if (a.dy != 0) continue;  // the top row comes from the padding
    apply_transform(t, {2, 2, 2}, 0, 0, index, in.data(), out.data());
    EXPECT_EQ(out[0], -1.0f);
    EXPECT_EQ(out[1], -1.0f);
    EXPECT_EQ(out[4], -0.125f);
    return;
  }
  FAIL() << "no sample with dy = 0 among 50";
}

TEST(DataTransform, CheckRejectsMisfits) {
  Transform t;
  t.mean = {0.5f};
  EXPECT_THROW(check_transform(t, {1, 2, 2}), dp::UserError);  // no std
  t.std = {0.0f};
  EXPECT_THROW(check_transform(t, {1, 2, 2}), dp::UserError);  // std <= 0
  t.std = {1.0f};
  EXPECT_NO_THROW(check_transform(t, {1, 2, 2}));
  EXPECT_THROW(check_transform(t, {3, 2, 2}), dp::UserError);  // one mean for 3 channels
  Transform f;
  f.hflip = true;
  EXPECT_THROW(check_transform(f, {784}), dp::UserError);
  try {
    check_transform(t, {3, 2, 2});
  } catch (const dp::UserError& e) {
    EXPECT_STREQ(e.what(), "normalisation has 1 means, expected 3 (one per channel of samples [3, 2, 2])");
  }
}

TEST(Transform, NormalisationTableHoldsTheMeansThenTheStds) {
  Transform t;
  EXPECT_FALSE(dp::data::normalisation_table(t, dp::Device::cpu()).defined());  // no normalisation
  t.mean = {0.485f, 0.456f, 0.406f};
  t.std = {0.229f, 0.224f, 0.225f};
  const dp::Tensor table = dp::data::normalisation_table(t, dp::Device::cpu());
  ASSERT_EQ(table.shape(), (dp::Shape{2, 3}));
  const float* v = table.data<float>();
  EXPECT_EQ(std::vector<float>(v, v + 3), t.mean);
  EXPECT_EQ(std::vector<float>(v + 3, v + 6), t.std);
}
