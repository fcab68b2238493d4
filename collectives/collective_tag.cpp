#include "collectives/collective_tag.h"

#include <atomic>

namespace dp {
namespace {

std::atomic<int64_t> g_step{-1};
thread_local int32_t t_bucket = -1;

}  // namespace

CollectiveTag current_collective_tag() { return CollectiveTag{g_step.load(std::memory_order_relaxed), t_bucket}; }

void set_collective_step(int64_t step) { g_step.store(step, std::memory_order_relaxed); }

BucketScope::BucketScope(int32_t bucket) : previous_(t_bucket) { t_bucket = bucket; }
BucketScope::~BucketScope() { t_bucket = previous_; }

}  // namespace dp
