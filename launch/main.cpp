#include <csignal>

#include "kernels/cpu/cpu_env.h"
#include "launch/cli.h"
#include "launch/signal_thread.h"

int main(int argc, char** argv) {
  // SIGUSR1/TERM/INT/USR2 blocked in every thread from here on (pending, not fatal, across the
  // re-exec below); the signal thread takes them (launch/signal_thread.h).
  dp::launch::block_handled_signals();
  dp::kernels::cpu::ensure_cpu_env(argv);    // may re-execute this program
  dp::launch::start_signal_thread();
  return dp::launch::run_cli(argc, argv);
}
