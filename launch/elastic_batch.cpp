// defines: train.elastic_batch's rule (launch/elastic_batch.h).
#include "launch/elastic_batch.h"

#include <vector>

#include "base/error.h"
#include "runtime/suggest.h"

namespace dp::launch {
namespace {

// The world sizes up to `global` that divide it, at most `most` of them (the error's hint).
std::string dividing_worlds(int64_t global, int most) {
  std::vector<std::string> ws;
  for (int64_t w = 1; w <= global && static_cast<int>(ws.size()) < most; ++w)
    if (global % w == 0) ws.push_back(std::to_string(w));
  return join(ws, ", ");
}

}  // namespace

BatchSplit split_global_batch(int64_t global, int world, int64_t max_batch, int64_t cfg_accum,
                              const std::string& ckpt_path) {
  DP_CHECK(global > 0 && world > 0 && max_batch > 0, "split_global_batch({}, {}, {})", global, world, max_batch);
  if (global % world != 0)
    DP_THROW_USER("checkpoint '{}' was trained with a global batch of {} samples per step, which {} ranks cannot "
                  "share evenly (train.elastic_batch = \"global\" keeps it): run on a world size that divides {} "
                  "({} ...), or set train.elastic_batch = \"per_rank\" to go on with train.batch_size = {} per rank "
                  "(a global batch of {})",
                  ckpt_path, global, world, global, dividing_worlds(global, 8), max_batch,
                  static_cast<int64_t>(world) * max_batch * cfg_accum);
  const int64_t per_rank = global / world;
  int64_t a = 1;
  while (per_rank % a != 0 || per_rank / a > max_batch) ++a;  // ends at a = per_rank at the latest
  return {per_rank / a, a};
}

int64_t checkpoint_global_batch(const CheckpointMeta& m, int64_t cfg_accum) {
  return m.global_batch > 0 ? m.global_batch : m.world_size * m.batch_size * cfg_accum;
}

StepPlan resume_plan(const Config& cfg, const StepPlan& cfg_plan, const CheckpointMeta& m, int world,
                     const std::string& ckpt_path) {
  if (cfg.train.elastic_batch != ElasticBatch::Global) return cfg_plan;
  if (m.world_size == world && m.global_batch == 0) return cfg_plan;
  const int64_t global = checkpoint_global_batch(m, cfg.train.accum_steps);
  const BatchSplit s = split_global_batch(global, world, cfg.train.batch_size, cfg.train.accum_steps, ckpt_path);
  if (s.batch_size == cfg_plan.batch_size && s.accum == cfg_plan.accum) return cfg_plan;
  Config c = cfg;
  c.train.batch_size = s.batch_size;
  c.train.accum_steps = s.accum;
  return plan_steps(c, cfg_plan.train_samples, world);
}

int64_t replanned_global_batch(const TrainConfig& t, const StepPlan& plan, int world) {
  if (plan.batch_size == t.batch_size && plan.accum == t.accum_steps) return 0;
  return static_cast<int64_t>(world) * plan.batch_size * plan.accum;
}

}  // namespace dp::launch
