// What a run derives from its cfg before the first step (launch/train_setup.h): the step plan,
// the reducer's options, the optimizer's checks. Pure functions: no processes, no data.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "launch/train_setup.h"
#include "runtime/config.h"
#include "runtime/data/sampler.h"

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

// A checkpoint of world N (batch bN, accum aN) after k steps of epoch e, resumed at world M
// (batch bM, accum aM): step_at_position plus the steps the rest of the epoch takes at M (counted
// with the real sampler, as the session counts them) is the end of epoch e of a straight M run;
// at the checkpoint's own world size and batch it is e * steps_per_epoch + k.
TEST(StepAtPosition, ResumedEpochsEndWhereAStraightRunOfTheNewWorldEnds) {
  int cases = 0;
  for (int64_t n : {37, 1000, 1001}) {
    for (bool dl : {false, true}) {
      for (int wn : {1, 2, 3}) {
        for (int wm : {1, 2, 3, 4}) {
          for (int64_t bm : {4, 16}) {
            for (int64_t am : {1, 3}) {
              const int64_t bn = 8, an = 1;
              Config cn = mlp_cfg({fmt::format("train.batch_size={}", bn), fmt::format("data.drop_last={}", dl)});
              Config cm = mlp_cfg({fmt::format("train.batch_size={}", bm), fmt::format("train.accum_steps={}", am),
                                   fmt::format("data.drop_last={}", dl)});
              if (dl && (n / wm < bm || n / wn < bn)) continue;  // no step in an epoch
              const StepPlan pn = plan_steps(cn, n, wn), pm = plan_steps(cm, n, wm);
              for (int64_t e : {0, 2}) {
                for (int64_t k = 0; k <= pn.steps_per_epoch; ++k) {
                  // The samples N's run has consumed after k steps of epoch e (the last step may be short).
                  const int64_t samples = std::min(k * bn * an * wn, n);
                  const int64_t at = step_at_position(pm, wm, dl, e, samples);
                  const int64_t r = static_cast<int64_t>(
                      data::sampler_indices_after(n, wm, 0, true, 7, static_cast<uint64_t>(e), dl, samples).size());
                  const int64_t loaded = dl ? r / bm * bm : r;
                  const int64_t left = (loaded + bm * am - 1) / (bm * am);
                  ASSERT_EQ(at + left, (e + 1) * pm.steps_per_epoch)
                      << "n " << n << " drop_last " << dl << " N " << wn << " M " << wm << " b " << bm << " accum " << am
                      << " epoch " << e << " k " << k;
                  ASSERT_EQ(step_at_position(pn, wn, dl, e, samples), e * pn.steps_per_epoch + k) << "same world";
                  ++cases;
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(cases, 1000);
  // 2 ranks x 128, stopped at step 15 of epoch 0 (3840 samples of 60000), resumed by 1 rank x 128:
  // step 30 of 469, where a straight 1-rank run is after 3840 samples.
  const StepPlan one = plan_steps(mlp_cfg({"train.batch_size=128"}), 60000, 1);
  EXPECT_EQ(one.steps_per_epoch, 469);
  EXPECT_EQ(step_at_position(one, 1, false, 0, 15 * 2 * 128), 30);
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
  Arena ten;
  ten.add("w", {10});
  TrainConfig t;
  t.optimizer = optim::OptimizerKind::Sgd, t.nesterov = true, t.momentum = 0;
  EXPECT_THROW(make_optimizer(t, ten), UserError);
  t.momentum = 0.9, t.dampening = 0.1;
  EXPECT_THROW(make_optimizer(t, ten), UserError);
  t.dampening = 0;
  EXPECT_EQ(make_optimizer(t, ten)->name(), "sgd");
  t.optimizer = optim::OptimizerKind::AdamW;
  EXPECT_EQ(make_optimizer(t, ten)->name(), "adamw");
}

}  // namespace
}  // namespace dp::launch
