#include "launch/stop_signals.h"

#include <atomic>
#include <cstdlib>

#include "launch/command.h"
#include "base/error.h"
#include "runtime/tensor.h"

namespace dp::launch {
namespace {

constexpr int kSignals[3] = {SIGUSR1, SIGTERM, SIGINT};
std::atomic<int> g_received{0};  // the highest-ranked stop signal so far

void on_stop_signal(int sig) {
  int cur = g_received.load(std::memory_order_relaxed);
  while (stop_rank_of(sig) > stop_rank_of(cur) && !g_received.compare_exchange_weak(cur, sig)) {
  }
}

}  // namespace

int stop_rank_of(int sig) {
  if (sig == SIGUSR1) return 3;
  if (sig == SIGTERM) return 2;
  if (sig == SIGINT) return 1;
  return 0;
}

int stop_signal_of_rank(int rank) {
  switch (rank) {
    case 3: return SIGUSR1;
    case 2: return SIGTERM;
    case 1: return SIGINT;
    default: return 0;
  }
}

void block_usr1() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  ::sigprocmask(SIG_BLOCK, &set, nullptr);
}

void catch_usr1_early() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  CHECK_SYS(::sigaction(SIGUSR1, &sa, nullptr));
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
}

StopRequest::StopRequest() {
  for (int i = 0; i < 3; ++i) {
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    CHECK_SYS(::sigaction(kSignals[i], &sa, &old_[i]));
  }
}

StopRequest::~StopRequest() {
  for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
}

int StopRequest::received() { return g_received.load(); }

int StopRequest::agree(Communicator& comm) const {
  const int mine = stop_rank_of(received());
  if (comm.size() == 1) return stop_signal_of_rank(mine);
  Tensor t = Tensor::zeros({1}, DType::I32);
  t.data<int32_t>()[0] = mine;
  comm.allreduce(t, ReduceOp::Max);
  return stop_signal_of_rank(t.data<int32_t>()[0]);
}

bool requeue_slurm_job(std::string& message) {
  const char* job = std::getenv("SLURM_JOB_ID");
  if (job == nullptr || *job == '\0') {
    message = "not a Slurm job (SLURM_JOB_ID is not set): nothing to requeue";
    return false;
  }
  for (const char* c = job; *c; ++c)
    if (*c < '0' || *c > '9') {
      message = fmt::format("SLURM_JOB_ID = '{}' is not a job number: not requeued", job);
      return false;
    }
  // `scancel --signal=USR1` reaches every process of the job, and this rank may get it after
  // another rank already did (the ranks agree on the stop through the all-reduce): scontrol,
  // our child, must not die of that late USR1, so it runs with USR1 ignored (kept across exec).
  const std::string cmd = fmt::format("trap '' USR1; exec scontrol requeue {} 2>&1", job);
  const CommandResult r = run_command(cmd);
  if (!r.started) {
    message = fmt::format("could not run '{}': {}", cmd, r.output);
    return false;
  }
  std::string out = r.output;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  if (r.exit_code == 0) {
    message = fmt::format("job {} requeued (scontrol requeue {})", job, job);
    return true;
  }
  const int code = r.exit_code;
  message = fmt::format("'scontrol requeue {}' failed (exit {}{}{}); the checkpoint is written, resubmit the job to "
                        "continue",
                        job, code, out.empty() ? "" : ": ", out);
  return false;
}

}  // namespace dp::launch
