// Tests for make_synthetic (runtime/data/synthetic.cpp): deterministic per (seed, index), values
// in [0, 1), balanced-ish labels, and learnable (nearest class mean classifies held-out data).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "runtime/data/dataset.h"

using dp::data::make_synthetic;

TEST(DataSynthetic, DeterministicPerSeedAndIndex) {
  auto a = make_synthetic(1000, {3, 4, 5}, 7, 11);
  auto b = make_synthetic(1000, {3, 4, 5}, 7, 11);
  auto c = make_synthetic(1000, {3, 4, 5}, 7, 12);
  EXPECT_EQ(a->size(), 1000);
  EXPECT_EQ(a->sample_shape(), (dp::Shape{3, 4, 5}));
  EXPECT_EQ(a->num_classes(), 7);
  // a is read forwards, b backwards: a sample does not depend on what was read before it.
  std::vector<float> xa(100 * 60), xb(100 * 60), xc(60);
  std::vector<int32_t> ya(100), yb(100);
  for (int64_t i = 0; i < 100; ++i) ya[i] = a->get(i, xa.data() + i * 60);
  for (int64_t i = 99; i >= 0; --i) yb[i] = b->get(i, xb.data() + i * 60);
  EXPECT_EQ(ya, yb);
  EXPECT_EQ(std::memcmp(xa.data(), xb.data(), xa.size() * sizeof(float)), 0);
  int differ = 0;
  for (int64_t i = 0; i < 100; ++i) {
    c->get(i, xc.data());
    differ += std::memcmp(xa.data() + i * 60, xc.data(), 60 * sizeof(float)) != 0;
  }
  EXPECT_EQ(differ, 100);
  // A dataset of another size with the same seed has the same samples at the same indices.
  auto d = make_synthetic(50, {3, 4, 5}, 7, 11);
  std::vector<float> xd(60);
  EXPECT_EQ(d->get(42, xd.data()), ya[42]);
  EXPECT_EQ(std::memcmp(xa.data() + 42 * 60, xd.data(), 60 * sizeof(float)), 0);
  EXPECT_THROW(d->get(50, xd.data()), dp::DpError);
}

TEST(DataSynthetic, ValuesInUnitRangeAndLabelsSpread) {
  auto ds = make_synthetic(5000, {1, 8, 8}, 10, 3);
  std::vector<float> x(64);
  std::vector<int> counts(10, 0);
  for (int64_t i = 0; i < ds->size(); ++i) {
    const int32_t y = ds->get(i, x.data());
    ASSERT_TRUE(y >= 0 && y < 10);
    counts[y]++;
    for (float v : x) ASSERT_TRUE(v >= 0.0f && v < 1.0f) << v;
  }
  for (int c = 0; c < 10; ++c) {  // 500 expected, sd ~ 21
    EXPECT_GT(counts[c], 400) << c;
    EXPECT_LT(counts[c], 600) << c;
  }
}

TEST(DataSynthetic, LabelsFollowFromTheInputs) {
  // Class means from the first 2000 samples classify the next 1000 by nearest mean.
  const int K = 10, D = 3 * 8 * 8;
  auto ds = make_synthetic(3000, {3, 8, 8}, K, 2024);
  std::vector<double> mean(K * D, 0.0);
  std::vector<int> count(K, 0);
  std::vector<float> x(D);
  for (int64_t i = 0; i < 2000; ++i) {
    const int32_t y = ds->get(i, x.data());
    count[y]++;
    for (int j = 0; j < D; ++j) mean[y * D + j] += x[j];
  }
  for (int c = 0; c < K; ++c)
    for (int j = 0; j < D; ++j) mean[c * D + j] /= count[c];
  // The class means are far apart compared with the noise (sd 0.4 / sqrt(12) ~ 0.115 per value).
  double min_dist2 = 1e9;
  for (int a = 0; a < K; ++a)
    for (int b = a + 1; b < K; ++b) {
      double d2 = 0;
      for (int j = 0; j < D; ++j) d2 += (mean[a * D + j] - mean[b * D + j]) * (mean[a * D + j] - mean[b * D + j]);
      min_dist2 = std::min(min_dist2, d2);
    }
  EXPECT_GT(min_dist2, 3.0);  // expected 0.36 * D / 6 = 11.5
  int correct = 0;
  for (int64_t i = 2000; i < 3000; ++i) {
    const int32_t y = ds->get(i, x.data());
    int best = -1;
    double best_d = 1e30;
    for (int c = 0; c < K; ++c) {
      double d = 0;
      for (int j = 0; j < D; ++j) d += (x[j] - mean[c * D + j]) * (x[j] - mean[c * D + j]);
      if (d < best_d) best_d = d, best = c;
    }
    correct += best == y;
  }
  EXPECT_GE(correct, 990);
}

TEST(DataSynthetic, BadArguments) {
  EXPECT_THROW(make_synthetic(-1, {1}, 2, 0), dp::DpError);
  EXPECT_THROW(make_synthetic(10, {1}, 0, 0), dp::DpError);
  EXPECT_THROW(make_synthetic(10, {}, 2, 0), dp::DpError);
  EXPECT_THROW(make_synthetic(10, {3, 0}, 2, 0), dp::DpError);
}
