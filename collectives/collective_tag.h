// defines: CollectiveTag, what the training loop knows about a collective that the backend
// cannot: the training step it belongs to and the gradient bucket it reduces. The flight
// recorder (collectives/flight_recorder.h) stores it, the straggler report groups by it and the
// desync check (collectives/ring/transport.h) hashes the bucket, so that two ranks reducing
// different buckets of the same size are an error instead of a silently wrong average.
//
// How a tag reaches the backend without a parameter on every collective: the step is one value
// per process (set_collective_step, by the trainer at the start of each step), the bucket is
// per thread (BucketScope, by the reducer around the call that issues a bucket's all-reduce).
// Backends read current_collective_tag() on the issuing thread, when the collective is issued.
#pragma once
#include <cstdint>

namespace dp {

struct CollectiveTag {
  int64_t step = -1;    // the training step (1-based), -1 outside training
  int32_t bucket = -1;  // the gradient bucket, -1 for any other collective
};

// The tag a collective issued now, on this thread, carries.
CollectiveTag current_collective_tag();

// Collectives issued from now on (any thread) belong to `step`.
void set_collective_step(int64_t step);

// While it lives, collectives issued by this thread reduce gradient bucket `bucket`.
class BucketScope {
 public:
  explicit BucketScope(int32_t bucket);
  ~BucketScope();
  BucketScope(const BucketScope&) = delete;
  BucketScope& operator=(const BucketScope&) = delete;

 private:
  int32_t previous_;
};

}  // namespace dp
