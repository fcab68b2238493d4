// defines: run_command, a shell command's exit status and standard output (the way dptrain calls
// Slurm's tools: sbatch, scontrol).
#pragma once
#include <string>

namespace dp::launch {

struct CommandResult {
  bool started = false;  // false: it could not be started (`output` says why)
  int exit_code = -1;    // the command's exit status; -1 when it did not exit normally
  int signal = 0;        // the signal that ended it, 0 when it exited
  std::string output;    // its standard output (add "2>&1" to the command for its errors too)
};

// Runs `cmd` with /bin/sh -c (an empty signal mask) and waits for it. Never throws.
CommandResult run_command(const std::string& cmd);

}  // namespace dp::launch
