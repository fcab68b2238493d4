// defines: when training checkpoints (checkpoint.every_steps, checkpoint.every_s): pure functions,
// tested without a run (tests/runtime/checkpoint/test_checkpoint_schedule.cpp).
//
// The step rule is the same on every rank. The time rule reads one clock: the trainer asks it on
// rank 0 only and shares the answer on the all-reduce every step already makes (launch/
// stop_signals.h, StopRequest::agree_after_step), so every rank saves after the same step.
#pragma once
#include <cstdint>

namespace dp {

// every_steps > 0 and step a multiple of it.
bool checkpoint_due_by_steps(int64_t step, int64_t every_steps);

// every_s > 0 and at least every_s seconds of wall time since the last checkpoint began (or since
// training started, before the first).
bool checkpoint_due_by_time(double every_s, double seconds_since_last);

}  // namespace dp
