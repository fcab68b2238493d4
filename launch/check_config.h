// defines: check_config, what `dptrain --check model.cfg` does: everything a run checks before
// its first step that needs no other rank and no device — the cfg (already parsed), the data
// files (opened and validated: magic numbers, sizes, labels), the model (built on the CPU, its
// output against the data's classes) and the optimizer — then the resolved model on stdout
// (parameter count, one line per layer with its output shape and parameters). It writes
// nothing: no run directory, no log file, no checkpoint.
#pragma once
#include <string>

#include "runtime/config.h"

namespace dp::launch {

// Returns 0 after printing the summary; throws UserError for the first problem (the caller prints
// it as "dptrain: error: ..." and exits 2).
int check_config(const Config& cfg, const std::string& cfg_path);

}  // namespace dp::launch
