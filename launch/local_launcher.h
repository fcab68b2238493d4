// defines: run_local, the local multi-process launcher behind `dptrain --nproc N` (torchrun's
// role on one machine), and worker_args_of (what the workers are given).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "launch/restart_policy.h"

namespace dp::launch {

// One restart of the job, as the launcher makes it.
struct RestartEvent {
  int restart = 0;       // 1 for the first
  int max_restarts = 0;  // --max-restarts
  WorkerExit failure;    // the worker whose failure caused it (failure_cause)
  std::string host;      // where it ran (this host)
};

struct LocalLaunchOptions {
  std::string exe = "/proc/self/exe";  // what each worker runs (tests run a shell script)
  double grace_s = 10;                 // after SIGTERM, how long a worker may take before SIGKILL
  int max_restarts = 0;                // --max-restarts: how often a failed job starts again
  // Called between two launches, every worker gone: dptrain's records the restart in the run
  // directory (launch/restart_record.h) and returns what the launcher's restart line adds (where
  // the job resumes, the steps lost); none: the line names the failure only.
  std::function<std::string(const RestartEvent&)> on_restart;
};

// Spawns nproc workers: `exe worker_args...` (worker_args excludes the program name) with the
// env bootstrap's variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK=0,
// MASTER_ADDR=127.0.0.1, MASTER_PORT=a free port; their presence tells a worker it is one and
// must not launch again). Each worker's stdout and stderr lines reach ours prefixed "[rank r] ".
// SIGINT, SIGTERM and SIGUSR1 are forwarded to every worker (workers have their own process
// group, so a terminal's Ctrl-C reaches them once, through us; they die with us: PDEATHSIG).
// When a worker fails (non-zero exit or a signal) the others get SIGTERM, then SIGKILL after
// grace_s. With max_restarts K > 0, a failure that restart_verdict allows (not a cfg or input
// error, not a stop the launcher was asked for) starts all N again, up to K times, each with a
// fresh MASTER_PORT and job token, DPTRAIN_RESTART_COUNT = 1, 2, ... and restart_args (they
// resume from the run's newest checkpoint); each restart is one line on our stderr. Returns 0
// when every worker of the last launch exited 0, else the failure's status (its exit code, or 128
// + signal number), saying so when restarts were allowed.
int run_local(int nproc, const std::vector<std::string>& worker_args);
int run_local(int nproc, const std::vector<std::string>& worker_args, const LocalLaunchOptions& options);

// The workers' arguments: ours (argv[1..argc)) without --nproc N / --nproc=N and --max-restarts K
// / --max-restarts=K, so that a worker never launches again. Pure.
std::vector<std::string> worker_args_of(int argc, const char* const* argv);

}  // namespace dp::launch
