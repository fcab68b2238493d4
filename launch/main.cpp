#include <csignal>

#include "kernels/cpu/cpu_env.h"
#include "launch/cli.h"
#include "launch/stop_signals.h"

int main(int argc, char** argv) {
  dp::launch::block_usr1();                  // pending, not fatal, across the re-exec below
  std::signal(SIGUSR2, SIG_IGN);             // the flight record's signal: harmless until it is caught
  dp::kernels::cpu::ensure_cpu_env(argv);    // may re-execute this program
  dp::launch::catch_usr1_early();
  return dp::launch::run_cli(argc, argv);
}
