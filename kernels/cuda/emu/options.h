// defines: the emulator's tunables, read once from the environment and printed once when set
// (one table, as NCCL_PARAM does):
//   DP_EMU_RACECHECK  0|1   check shared-memory accesses for races between barriers (default 0)
//   DP_EMU_STACK_KB   int   stack of each emulated CUDA thread, KiB (default 256; mapped lazily)
#pragma once
#include <cstddef>

namespace dp::emu {

struct Options {
  bool racecheck;
  size_t stack_bytes;
};

const Options& options();

// Whether shared-memory accesses are checked now: DP_EMU_RACECHECK, unless a test overrode it.
bool racecheck_enabled();
void set_racecheck(bool on);

}  // namespace dp::emu
