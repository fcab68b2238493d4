// What a run derives from its cfg before the first step (launch/train_setup.h): the step plan,
// the reducer's options, the optimizer's checks. Pure functions: no processes, no data.
#include <gtest/gtest.h>

#include "launch/train_setup.h"
#include "runtime/config.h"

namespace dp::launch {
namespace {

Config mlp_cfg(std::vector<std::string> sets) {
  return load_config(std::string(DPTRAIN_SOURCE_DIR) + "/models/fmnist_mlp.cfg", sets);
}

TEST(StepPlan, EpochsOfTheRanksShareInStepsOfAccumMicroBatches) {
  // 1000 samples over 2 ranks: 500 each, 32 batches of 16 (the last one short), 16 steps of 2.
  const StepPlan p = plan_steps(mlp_cfg({"train.batch_size=16", "train.accum_steps=2", "train.epochs=3"}), 1000, 2);
  EXPECT_EQ(p.batch_size, 16);
  EXPECT_EQ(p.accum, 2);
  EXPECT_EQ(p.train_samples, 1000);
  EXPECT_EQ(p.steps_per_epoch, 16);
  EXPECT_EQ(p.total, 48);
  EXPECT_EQ(p.epochs, 3);
  // drop_last keeps whole batches only: 31 of them, 16 steps (the last one of 1 micro-batch).
  EXPECT_EQ(plan_steps(mlp_cfg({"train.batch_size=16", "train.accum_steps=2", "data.drop_last=true"}), 1000, 2)
                .steps_per_epoch,
            16);
  EXPECT_EQ(plan_steps(mlp_cfg({"train.batch_size=16", "data.drop_last=true"}), 1000, 2).steps_per_epoch, 31);
}

TEST(StepPlan, TrainStepsWinsAndTheEpochsCoverThem) {
  const StepPlan p = plan_steps(mlp_cfg({"train.batch_size=100", "train.steps=25"}), 1000, 1);
  EXPECT_EQ(p.steps_per_epoch, 10);
  EXPECT_EQ(p.total, 25);
  EXPECT_EQ(p.epochs, 3);
}

TEST(StepPlan, NoStepInAnEpochOrAScheduleLongerThanTheRunIsAUserError) {
  try {
    plan_steps(mlp_cfg({"train.batch_size=600", "data.drop_last=true"}), 1000, 2);
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("train.batch_size = 600 is larger than the 1000 training samples"),
              std::string::npos)
        << e.what();
  }
  try {
    plan_steps(mlp_cfg({"train.batch_size=100", "train.steps=5", "train.warmup_steps=10"}), 1000, 1);
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("the run has 5 steps (train.steps or train.epochs) and train.warmup_steps = 10"),
              std::string::npos)
        << e.what();
  }
}

TEST(ReducerOptionsOf, BucketBytesOverlapAndWireFromDist) {
  DistConfig d;
  d.first_bucket_mb = 0.5, d.bucket_mb = 4, d.overlap = false, d.allow_unused = true, d.compress = GradCompress::Bf16;
  ReducerOptions ro = reducer_options_of(d, nullptr);
  EXPECT_EQ(ro.first_bucket_bytes, 500'000);
  EXPECT_EQ(ro.bucket_bytes, 4'000'000);
  EXPECT_FALSE(ro.overlap);
  EXPECT_TRUE(ro.allow_unused);
  EXPECT_EQ(ro.wire, DType::BF16);
  EXPECT_EQ(ro.gpu, nullptr);
  d.compress = GradCompress::Fp16;
  EXPECT_EQ(reducer_options_of(d, nullptr).wire, DType::F16);
  d.compress = GradCompress::None;
  EXPECT_EQ(reducer_options_of(d, nullptr).wire, DType::F32);
}

TEST(MakeOptimizer, NesterovNeedsMomentumAndNoDampening) {
  TrainConfig t;
  t.optimizer = optim::OptimizerKind::Sgd, t.nesterov = true, t.momentum = 0;
  EXPECT_THROW(make_optimizer(t, 10), UserError);
  t.momentum = 0.9, t.dampening = 0.1;
  EXPECT_THROW(make_optimizer(t, 10), UserError);
  t.dampening = 0;
  EXPECT_EQ(make_optimizer(t, 10)->name(), "sgd");
  t.optimizer = optim::OptimizerKind::AdamW;
  EXPECT_EQ(make_optimizer(t, 10)->name(), "adamw");
}

}  // namespace
}  // namespace dp::launch
