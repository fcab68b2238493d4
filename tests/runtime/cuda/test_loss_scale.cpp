// Dynamic loss scaling's rule against torch's GradScaler (_amp_update_scale_), step by step.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "runtime/cuda/loss_scale.h"
#include "base/error.h"

namespace dp::cuda {
namespace {

TEST(LossScaler, StartsAtTheInitialScaleWithTorchsInverse) {
  LossScaler s;
  EXPECT_EQ(s.scale(), 65536.0f);
  EXPECT_EQ(s.inverse_scale(), 1.0f / 65536.0f);
  LossScaler odd({3.0f, 2.0f, 0.5f, 10});
  EXPECT_EQ(odd.inverse_scale(), static_cast<float>(1.0 / 3.0));  // rounded once, from double
}

TEST(LossScaler, InfHalvesAndSkipsCleanStepsGrowAfterTheInterval) {
  LossScaler s({1024.0f, 2.0f, 0.5f, 3});
  EXPECT_TRUE(s.update(false));
  EXPECT_TRUE(s.update(false));
  EXPECT_EQ(s.scale(), 1024.0f);
  EXPECT_EQ(s.growth_tracker(), 2);
  EXPECT_FALSE(s.update(true));  // skip the step, back off, start counting again
  EXPECT_EQ(s.scale(), 512.0f);
  EXPECT_EQ(s.growth_tracker(), 0);
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(s.update(false));
  EXPECT_EQ(s.scale(), 512.0f);
  EXPECT_TRUE(s.update(false));  // the third clean step in a row
  EXPECT_EQ(s.scale(), 1024.0f);
  EXPECT_EQ(s.growth_tracker(), 0);
  EXPECT_FALSE(s.update(true));
  EXPECT_FALSE(s.update(true));
  EXPECT_EQ(s.scale(), 256.0f);
}

TEST(LossScaler, GrowthStopsBeforeInfinity) {
  const float big = std::numeric_limits<float>::max() / 1.5f;
  LossScaler s({big, 2.0f, 0.5f, 1});
  EXPECT_TRUE(s.update(false));
  EXPECT_EQ(s.scale(), big);  // big * 2 overflows: kept, as torch does
  EXPECT_EQ(s.growth_tracker(), 0);
}

TEST(LossScaler, RestoreContinuesTheCountAndRejectsNonsense) {
  LossScaler s({1024.0f, 2.0f, 0.5f, 4});
  s.restore(8.0f, 3);
  EXPECT_TRUE(s.update(false));
  EXPECT_EQ(s.scale(), 16.0f);
  EXPECT_THROW(s.restore(0.0f, 0), UserError);
  EXPECT_THROW(s.restore(8.0f, 4), UserError);
  EXPECT_THROW(s.restore(std::numeric_limits<float>::infinity(), 0), UserError);
}

TEST(LossScaler, RefusesTheOptionsTorchRefuses) {
  EXPECT_THROW(LossScaler({65536.0f, 1.0f, 0.5f, 2000}), UserError);
  EXPECT_THROW(LossScaler({65536.0f, 2.0f, 1.0f, 2000}), UserError);
  EXPECT_THROW(LossScaler({65536.0f, 2.0f, 0.0f, 2000}), UserError);
  EXPECT_THROW(LossScaler({65536.0f, 2.0f, 0.5f, 0}), UserError);
  EXPECT_THROW(LossScaler({-1.0f, 2.0f, 0.5f, 2000}), UserError);
  try {
    LossScaler({65536.0f, 0.5f, 0.5f, 2000});
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("growth_factor = 0.5 must be finite and > 1"));
  }
}

}  // namespace
}  // namespace dp::cuda
