#include "launch/fault_kill.h"

namespace dp::launch {

int64_t fault_kill_step(const Tunables& t, int rank) {
  if (!t.is_set(Tunable::FaultKillAfterStep)) return -1;
  if (t.is_set(Tunable::FaultKillRank) && t.integer(Tunable::FaultKillRank) != rank) return -1;
  if (t.integer(Tunable::RestartCount) >= t.integer(Tunable::FaultKillLaunches)) return -1;
  return t.integer(Tunable::FaultKillAfterStep);
}

}  // namespace dp::launch
