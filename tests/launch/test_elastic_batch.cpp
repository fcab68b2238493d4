// train.elastic_batch's rule (launch/elastic_batch.h): the batch plan of a run resumed at another
// world size. Pure functions: no processes, no data.
#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "launch/elastic_batch.h"
#include "runtime/config.h"

namespace dp::launch {
namespace {

Config mlp_cfg(std::vector<std::string> sets) {
  return load_config(std::string(DPTRAIN_SOURCE_DIR) + "/models/fmnist_mlp.cfg", sets);
}

CheckpointMeta meta_of(int64_t world, int64_t batch, int64_t global = 0) {
  CheckpointMeta m;
  m.world_size = world;
  m.batch_size = batch;
  m.global_batch = global;
  return m;
}

TEST(ElasticBatch, SplitKeepsTheGlobalBatchAccumulatingWhereTheRankBatchWouldExceedTheCfgs) {
  // 24 per step: 4 ranks x 6 (the cfg's plan) -> 3 ranks x 8 > 6: 2 micro-batches of 4.
  BatchSplit s = split_global_batch(24, 3, 6, 1, "c");
  EXPECT_EQ(s.batch_size, 4);
  EXPECT_EQ(s.accum, 2);
  s = split_global_batch(24, 4, 6, 1, "c");  // back at 4 ranks: the cfg's own plan
  EXPECT_EQ(s.batch_size, 6);
  EXPECT_EQ(s.accum, 1);
  s = split_global_batch(24, 6, 6, 1, "c");  // more ranks: the rank batch shrinks
  EXPECT_EQ(s.batch_size, 4);
  EXPECT_EQ(s.accum, 1);
  s = split_global_batch(28, 2, 6, 1, "c");  // 14 per rank: 2 micro-batches of 7 exceed 6, so 7 of 2
  EXPECT_EQ(s.batch_size, 2);
  EXPECT_EQ(s.accum, 7);
  s = split_global_batch(34, 2, 6, 1, "c");  // 17 per rank, a prime above 6: micro-batches of 1
  EXPECT_EQ(s.batch_size, 1);
  EXPECT_EQ(s.accum, 17);
}

TEST(ElasticBatch, AGlobalBatchTheWorldCannotDivideIsAnErrorSayingWhatToDo) {
  try {
    split_global_batch(32, 3, 8, 1, "/r/checkpoints/step-00000020.safetensors");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(),
                 "checkpoint '/r/checkpoints/step-00000020.safetensors' was trained with a global batch of 32 samples "
                 "per step, which 3 ranks cannot share evenly (train.elastic_batch = \"global\" keeps it): run on a "
                 "world size that divides 32 (1, 2, 4, 8, 16, 32 ...), or set train.elastic_batch = \"per_rank\" to "
                 "go on with train.batch_size = 8 per rank (a global batch of 24)");
  }
}

TEST(ElasticBatch, ResumePlanKeepsTheCfgsPlanAtTheCheckpointsWorldAndWithPerRank) {
  const Config cfg = mlp_cfg({"train.batch_size=6", "train.epochs=2"});
  const StepPlan p4 = plan_steps(cfg, 2400, 4);
  EXPECT_EQ(checkpoint_global_batch(meta_of(4, 6), 1), 24);
  // The checkpoint's own world: the cfg's plan (a changed train.batch_size too, as before).
  StepPlan r = resume_plan(cfg, p4, meta_of(4, 5), 4, "c");
  EXPECT_EQ(r.batch_size, 6);
  EXPECT_EQ(r.accum, 1);
  // per_rank: the cfg's plan at any world.
  const Config per_rank = mlp_cfg({"train.batch_size=6", "train.epochs=2", "train.elastic_batch=per_rank"});
  const StepPlan p3 = plan_steps(per_rank, 2400, 3);
  r = resume_plan(per_rank, p3, meta_of(4, 6), 3, "c");
  EXPECT_EQ(r.batch_size, 6);
  EXPECT_EQ(r.steps_per_epoch, 134);  // 800 per rank in batches of 6
  EXPECT_EQ(per_rank.train.elastic_batch, ElasticBatch::PerRank);
  EXPECT_EQ(cfg.train.elastic_batch, ElasticBatch::Global);  // the default
}

TEST(ElasticBatch, ResumePlanAtAnotherWorldKeepsTheGlobalBatchAndTheStepsPerEpoch) {
  const Config cfg = mlp_cfg({"train.batch_size=6", "train.epochs=2"});
  const StepPlan p3 = plan_steps(cfg, 2400, 3);
  const StepPlan r = resume_plan(cfg, p3, meta_of(4, 6), 3, "c");
  EXPECT_EQ(r.batch_size, 4);
  EXPECT_EQ(r.accum, 2);
  EXPECT_EQ(r.steps_per_epoch, 100);  // 2400 / 24, as at 4 ranks
  EXPECT_EQ(r.total, 200);
  EXPECT_EQ(replanned_global_batch(cfg.train, r, 3), 24);
  EXPECT_EQ(replanned_global_batch(cfg.train, p3, 3), 0);  // the cfg's plan records nothing
  // A checkpoint of that re-planned run, resumed at its own world 3, keeps the 24.
  const StepPlan again = resume_plan(cfg, p3, meta_of(3, 4, 24), 3, "c");
  EXPECT_EQ(again.batch_size, 4);
  EXPECT_EQ(again.accum, 2);
  // And back at 4 ranks: the cfg's plan again.
  const StepPlan p4 = plan_steps(cfg, 2400, 4);
  const StepPlan back = resume_plan(cfg, p4, meta_of(3, 4, 24), 4, "c");
  EXPECT_EQ(back.batch_size, 6);
  EXPECT_EQ(back.accum, 1);
  EXPECT_EQ(replanned_global_batch(cfg.train, back, 4), 0);
  EXPECT_THROW(resume_plan(cfg, plan_steps(cfg, 2400, 5), meta_of(4, 6), 5, "c"), UserError);
}

}  // namespace
}  // namespace dp::launch
