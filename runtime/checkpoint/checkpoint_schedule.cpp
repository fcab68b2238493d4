#include "runtime/checkpoint/checkpoint_schedule.h"

namespace dp {

bool checkpoint_due_by_steps(int64_t step, int64_t every_steps) { return every_steps > 0 && step % every_steps == 0; }

bool checkpoint_due_by_time(double every_s, double seconds_since_last) {
  return every_s > 0 && seconds_since_last >= every_s;
}

}  // namespace dp
