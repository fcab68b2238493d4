// defines: run_local, the local multi-process launcher behind `dptrain --nproc N` (torchrun's
// role on one machine), and worker_args_of (what the workers are given).
#pragma once
#include <string>
#include <vector>

namespace dp::launch {

struct LocalLaunchOptions {
  std::string exe = "/proc/self/exe";  // what each worker runs (tests run a shell script)
  double grace_s = 10;                 // after SIGTERM, how long a worker may take before SIGKILL
};

// Spawns nproc workers: `exe worker_args...` (worker_args excludes the program name) with the
// env bootstrap's variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK=0,
// MASTER_ADDR=127.0.0.1, MASTER_PORT=a free port; their presence tells a worker it is one and
// must not launch again). Each worker's stdout and stderr lines reach ours prefixed "[rank r] ".
// SIGINT, SIGTERM and SIGUSR1 are forwarded to every worker (workers have their own process
// group, so a terminal's Ctrl-C reaches them once, through us; they die with us: PDEATHSIG).
// When a worker fails (non-zero exit or a signal) the others get SIGTERM, then SIGKILL after
// grace_s. Returns 0 when every worker exited 0, else the first failure's status (its exit
// code, or 128 + signal number).
int run_local(int nproc, const std::vector<std::string>& worker_args);
int run_local(int nproc, const std::vector<std::string>& worker_args, const LocalLaunchOptions& options);

// The workers' arguments: ours (argv[1..argc)) without --nproc N / --nproc=N, so that a worker
// never launches again. Pure.
std::vector<std::string> worker_args_of(int argc, const char* const* argv);

}  // namespace dp::launch
