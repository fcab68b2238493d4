// Tests for runtime/optim/schedule: lr_at at the key steps of every kind, warmup, and validation.
// The words of train.schedule are the config schema's (tests/runtime/test_config.cpp).
// The comparison with torch.optim.lr_scheduler is tests/oracle/test_optim_torch.py.
#include "runtime/optim/schedule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"

namespace dp::optim {
namespace {

using ::testing::HasSubstr;

TEST(Schedule, Constant) {
  ScheduleOptions o;  // constant, base 0.1
  EXPECT_DOUBLE_EQ(lr_at(o, 0, 100), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(o, 99, 100), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(o, 1000, 100), 0.1);  // past the end: unchanged
  EXPECT_DOUBLE_EQ(lr_at(o, 5, 0), 0.1);       // total_steps does not matter for constant
}

TEST(Schedule, LinearWarmupFromZero) {
  ScheduleOptions o{.kind = ScheduleKind::Constant, .base_lr = 0.2, .warmup_steps = 10};
  EXPECT_DOUBLE_EQ(lr_at(o, 0, 100), 0.0);
  EXPECT_DOUBLE_EQ(lr_at(o, 1, 100), 0.02);
  EXPECT_DOUBLE_EQ(lr_at(o, 5, 100), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(o, 9, 100), 0.18);
  EXPECT_DOUBLE_EQ(lr_at(o, 10, 100), 0.2);
  EXPECT_DOUBLE_EQ(lr_at(o, 50, 100), 0.2);
}

TEST(Schedule, LinearWarmupFromAFactor) {
  ScheduleOptions o{.base_lr = 0.1, .warmup_steps = 4, .warmup_start_factor = 0.1};
  EXPECT_DOUBLE_EQ(lr_at(o, 0, 10), 0.01);                        // base * factor
  EXPECT_DOUBLE_EQ(lr_at(o, 2, 10), 0.1 * (0.1 + 0.9 * 0.5));     // halfway: 0.055
  EXPECT_DOUBLE_EQ(lr_at(o, 3, 10), 0.1 * (0.1 + 0.9 * 0.75));    // 0.0775
  EXPECT_DOUBLE_EQ(lr_at(o, 4, 10), 0.1);
  o.warmup_start_factor = 1.0;  // a factor of 1 is no warmup at all
  EXPECT_DOUBLE_EQ(lr_at(o, 0, 10), 0.1);
}

TEST(Schedule, StepDecay) {
  ScheduleOptions o{.kind = ScheduleKind::Step, .base_lr = 0.1, .step_size = 30, .gamma = 0.1};
  EXPECT_DOUBLE_EQ(lr_at(o, 0, 90), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(o, 29, 90), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(o, 30, 90), 0.1 * 0.1);
  EXPECT_DOUBLE_EQ(lr_at(o, 59, 90), 0.1 * 0.1);
  EXPECT_DOUBLE_EQ(lr_at(o, 60, 90), 0.1 * 0.01);
  EXPECT_DOUBLE_EQ(lr_at(o, 95, 90), 0.1 * 0.001);  // keeps decaying past total_steps, like StepLR
}

TEST(Schedule, StepDecayAfterWarmup) {
  ScheduleOptions o{.kind = ScheduleKind::Step, .base_lr = 1.0, .warmup_steps = 5, .step_size = 10, .gamma = 0.5};
  EXPECT_DOUBLE_EQ(lr_at(o, 0, 100), 0.0);
  EXPECT_DOUBLE_EQ(lr_at(o, 4, 100), 0.8);
  EXPECT_DOUBLE_EQ(lr_at(o, 5, 100), 1.0);   // decay counts from the end of warmup
  EXPECT_DOUBLE_EQ(lr_at(o, 14, 100), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(o, 15, 100), 0.5);
  EXPECT_DOUBLE_EQ(lr_at(o, 25, 100), 0.25);
}

TEST(Schedule, Cosine) {
  ScheduleOptions o{.kind = ScheduleKind::Cosine, .base_lr = 1.0};
  EXPECT_DOUBLE_EQ(lr_at(o, 0, 100), 1.0);
  EXPECT_NEAR(lr_at(o, 25, 100), (1 + std::sqrt(0.5)) / 2, 1e-15);  // 0.853553...
  EXPECT_NEAR(lr_at(o, 50, 100), 0.5, 1e-15);
  EXPECT_NEAR(lr_at(o, 75, 100), (1 - std::sqrt(0.5)) / 2, 1e-15);
  EXPECT_NEAR(lr_at(o, 100, 100), 0.0, 1e-15);
  EXPECT_NEAR(lr_at(o, 150, 100), 0.0, 1e-15);  // clamped: stays at min_lr past the end
}

TEST(Schedule, CosineWithFloorAndWarmup) {
  ScheduleOptions o{.kind = ScheduleKind::Cosine, .base_lr = 0.1, .warmup_steps = 10, .warmup_start_factor = 0.5,
                    .min_lr = 0.01};
  EXPECT_DOUBLE_EQ(lr_at(o, 0, 110), 0.05);
  EXPECT_DOUBLE_EQ(lr_at(o, 5, 110), 0.075);
  EXPECT_DOUBLE_EQ(lr_at(o, 10, 110), 0.1);                  // cosine starts at t = 0
  EXPECT_NEAR(lr_at(o, 60, 110), 0.01 + 0.09 * 0.5, 1e-15);  // halfway through the 100 cosine steps
  EXPECT_NEAR(lr_at(o, 110, 110), 0.01, 1e-15);
  EXPECT_NEAR(lr_at(o, 200, 110), 0.01, 1e-15);
}

std::string error_of(const ScheduleOptions& o, int64_t total = 100) {
  try {
    lr_at(o, 0, total);
  } catch (const UserError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Schedule, Validation) {
  EXPECT_THAT(error_of({.base_lr = -1}), HasSubstr("base_lr -1"));
  EXPECT_THAT(error_of({.warmup_steps = -3}), HasSubstr("warmup_steps -3"));
  EXPECT_THAT(error_of({.warmup_start_factor = 1.5}), HasSubstr("warmup_start_factor 1.5 must be in [0, 1]"));
  EXPECT_THAT(error_of({.kind = ScheduleKind::Step, .step_size = 0}), HasSubstr("step_size 0 must be > 0"));
  EXPECT_THAT(error_of({.kind = ScheduleKind::Step, .gamma = 0}), HasSubstr("gamma 0 must be"));
  EXPECT_THAT(error_of({.kind = ScheduleKind::Cosine, .base_lr = 0.1, .min_lr = 0.2}), HasSubstr("min_lr 0.2"));
  EXPECT_THAT(error_of({.kind = ScheduleKind::Cosine, .warmup_steps = 100}, 100),
              HasSubstr("total_steps 100 must exceed warmup_steps 100"));
  EXPECT_THAT(error_of({}, -1), HasSubstr("total_steps -1"));
  EXPECT_NO_THROW(validate_schedule({.kind = ScheduleKind::Step}, 10));
}

}  // namespace
}  // namespace dp::optim
