#include "launch/restart_policy.h"

#include <sys/wait.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "launch/exit_status.h"

namespace dp::launch {

WorkerExit worker_exit_of(int rank, int raw_status) {
  if (WIFSIGNALED(raw_status)) return {rank, 128 + WTERMSIG(raw_status), WTERMSIG(raw_status)};
  return {rank, WIFEXITED(raw_status) ? WEXITSTATUS(raw_status) : 1, 0};
}

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);  // "KILL"; null for a number without a name
  return abbrev ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", sig);
}

std::string describe_exit(const WorkerExit& e) {
  if (e.signal != 0) return fmt::format("was killed by signal {} ({})", e.signal, signal_name(e.signal));
  return fmt::format("exited with status {}", e.status);
}

WorkerExit failure_cause(const std::vector<WorkerExit>& failed) {
  const auto own = std::find_if(failed.begin(), failed.end(),
                                [](const WorkerExit& e) { return e.status != kExitCommunicationFailed; });
  return own != failed.end() ? *own : failed.front();
}

bool worth_retrying(const WorkerExit& e) {
  constexpr int kCannotExecute = 127;  // local_launcher.cpp's exec_worker
  return e.signal != 0 || (e.status != kExitUserError && e.status != kCannotExecute);
}

RestartVerdict restart_verdict(const WorkerExit& e, int restarts_done, int max_restarts, bool stop_requested) {
  if (stop_requested) return RestartVerdict::StopRequested;
  if (!worth_retrying(e)) return RestartVerdict::NotRetriable;
  if (restarts_done >= max_restarts) return RestartVerdict::Exhausted;
  return RestartVerdict::Restart;
}

std::vector<std::string> restart_args(const std::vector<std::string>& first_args) {
  std::vector<std::string> out;
  for (const auto& a : first_args)
    if (a != "--reset") out.push_back(a);
  out.push_back("--set");
  out.push_back("checkpoint.resume=true");
  return out;
}

}  // namespace dp::launch
