// defines: fault_kill_step, the step after which this rank kills itself for a test
// (DPTRAIN_FAULT_KILL_AFTER_STEP, its rank selector DPTRAIN_FAULT_KILL_RANK and its launch count
// DPTRAIN_FAULT_KILL_LAUNCHES against DPTRAIN_RESTART_COUNT: runtime/tunables.cpp's table).
#pragma once
#include <cstdint>

#include "runtime/tunables.h"

namespace dp::launch {

// Pure. The step N after which rank `rank` SIGKILLs itself, or -1 for never: the fault is unset,
// DPTRAIN_FAULT_KILL_RANK names another rank, or the job has been restarted
// DPTRAIN_FAULT_KILL_LAUNCHES times already (so that with the default 1 the restarted job runs
// past the step its first launch died at).
int64_t fault_kill_step(const Tunables& t, int rank);

}  // namespace dp::launch
