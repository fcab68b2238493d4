// defines: StopRequest (SIGUSR1/SIGTERM/SIGINT caught for the run, and the step at which every
// rank stops agreed through the communicator) and requeue_slurm_job.
//
// A signal handler only records which signal came. After each step every rank contributes what
// it received to one small all-reduce (max), so a signal that reached only some ranks stops all
// of them after the same step: they checkpoint together and leave. The reduced value ranks
// SIGUSR1 (Slurm's warning before the time limit: checkpoint, requeue, exit) above SIGTERM
// (preemption or scancel) above SIGINT (Ctrl-C).
#pragma once
#include <csignal>
#include <string>

#include "collectives/communicator.h"

namespace dp::launch {

// Catches SIGUSR1 for the whole process from now on (main() calls it first thing): Slurm's
// warning before the time limit, arriving during start-up or before the local launcher has
// its workers, is kept for later instead of killing the job. SIGTERM and SIGINT keep their
// default action until the training loop (Ctrl-C during a bootstrap wait just ends it).
// Idempotent. Unblocks SIGUSR1 after installing the handler: main() blocks it before anything
// that may re-execute the program (and the local launcher execs its workers with it blocked),
// so a SIGUSR1 in that window stays pending instead of killing the process.
void block_usr1();
void catch_usr1_early();

class StopRequest {
 public:
  // Installs the handlers (signals caught before, by catch_stop_signals, still count); the
  // destructor restores the previous ones.
  StopRequest();
  ~StopRequest();
  StopRequest(const StopRequest&) = delete;
  StopRequest& operator=(const StopRequest&) = delete;

  // The signal this process received (the highest-ranked if several), 0 if none.
  static int received();
  // Collective: the signal every rank stops for, 0 if no rank got one. Called by every rank at
  // the same point of every step.
  int agree(Communicator& comm) const;

 private:
  struct sigaction old_[3];
};

// Precedence of the stop signals: SIGUSR1 3, SIGTERM 2, SIGINT 1, anything else 0 (pure).
int stop_rank_of(int sig);
int stop_signal_of_rank(int rank);

// `scontrol requeue <job>` for $SLURM_JOB_ID: true when it succeeded; `message` says what
// happened (including why not: no Slurm job, scontrol missing or failing).
bool requeue_slurm_job(std::string& message);

}  // namespace dp::launch
