// defines: StopRequest (SIGUSR1/SIGTERM/SIGINT caught for the run, and the step at which every
// rank stops agreed through the communicator) and requeue_slurm_job.
//
// The signal thread (launch/signal_thread.h) records which signal came: SIGUSR1 from main() on
// (Slurm's warning before the time limit, arriving during start-up, is kept for later instead of
// killing the job), SIGTERM and SIGINT while a StopRequest lives (before it they end the process:
// Ctrl-C during a bootstrap wait just ends it). After each step every rank contributes what
// it received to one small all-reduce (max), so a signal that reached only some ranks stops all
// of them after the same step: they checkpoint together and leave. The reduced value ranks
// SIGUSR1 (Slurm's warning before the time limit: checkpoint, requeue, exit) above SIGTERM
// (preemption or scancel) above SIGINT (Ctrl-C).
#pragma once
#include <csignal>
#include <string>

#include "collectives/communicator.h"

namespace dp::launch {

class StopRequest {
 public:
  // SIGTERM and SIGINT are caught while it lives (a SIGUSR1 caught before still counts).
  StopRequest();
  ~StopRequest();
  StopRequest(const StopRequest&) = delete;
  StopRequest& operator=(const StopRequest&) = delete;

  // The signal this process received (the highest-ranked if several), 0 if none.
  static int received();
  // Collective: the signal every rank stops for, 0 if no rank got one. Called by every rank at
  // the same point of every step.
  int agree(Communicator& comm) const;

  struct Agreement {
    int signal = 0;           // as agree()
    bool checkpoint = false;  // rank 0 asked for a checkpoint of this step
  };
  // Collective: agree(), and with it rank 0's time-based checkpoint decision (checkpoint.every_s:
  // one clock decides, so every rank saves after the same step; other ranks' `checkpoint` is
  // ignored). It rides on the same all-reduce (two int32 instead of one): no collective of its own.
  Agreement agree_after_step(Communicator& comm, bool checkpoint) const;
};

// `scontrol requeue <job>` for $SLURM_JOB_ID: true when it succeeded; `message` says what
// happened (including why not: no Slurm job, scontrol missing or failing).
bool requeue_slurm_job(std::string& message);

}  // namespace dp::launch
