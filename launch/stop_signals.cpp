#include "launch/stop_signals.h"

#include <cstdlib>
#include <cstring>

#include "launch/command.h"
#include "launch/signal_thread.h"
#include "base/error.h"
#include "runtime/tensor.h"

namespace dp::launch {

StopRequest::StopRequest() {
  start_signal_thread();  // dptrain's main() started it already; a test that trains in-process has not
  set_stop_signals_caught(true);
}

StopRequest::~StopRequest() { set_stop_signals_caught(false); }

int StopRequest::received() { return stop_signal_received(); }

int StopRequest::agree(Communicator& comm) const {
  const int mine = stop_rank_of(received());
  if (comm.size() == 1) return stop_signal_of_rank(mine);
  Tensor t = Tensor::zeros({1}, DType::I32);
  t.data<int32_t>()[0] = mine;
  comm.allreduce(t, ReduceOp::Max);
  return stop_signal_of_rank(t.data<int32_t>()[0]);
}

StopRequest::Agreement StopRequest::agree_after_step(Communicator& comm, bool checkpoint) const {
  const int mine = stop_rank_of(received());
  const int32_t wish = comm.rank() == 0 && checkpoint ? 1 : 0;
  if (comm.size() == 1) return {stop_signal_of_rank(mine), wish != 0};
  Tensor t = Tensor::zeros({2}, DType::I32);
  t.data<int32_t>()[0] = mine;
  t.data<int32_t>()[1] = wish;
  comm.allreduce(t, ReduceOp::Max);  // max of rank 0's wish and the others' zeros: rank 0's wish
  return {stop_signal_of_rank(t.data<int32_t>()[0]), t.data<int32_t>()[1] != 0};
}

namespace {

// What `scontrol requeue <job>` did, from its result: true when the controller accepted it.
bool requeue_verdict(const std::string& job, const std::string& cmd, const CommandResult& r, std::string& message) {
  if (!r.started) {
    message = fmt::format("could not run '{}': {}", cmd, r.output);
    return false;
  }
  if (r.exit_code == 0) {
    message = fmt::format("job {} requeued (scontrol requeue {})", job, job);
    return true;
  }
  if (r.signal != 0) {
    message = fmt::format("'scontrol requeue {}' was killed by signal {} ({}) before it answered: the job may or may "
                          "not be requeued (`scontrol show job {}` counts Restarts); the checkpoint is written, "
                          "resubmit the job if it was not",
                          job, r.signal, strsignal(r.signal), job);
    return false;
  }
  std::string out = r.output;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  message = fmt::format("'scontrol requeue {}' failed (exit {}{}{}); the checkpoint is written, resubmit the job to "
                        "continue",
                        job, r.exit_code, out.empty() ? "" : ": ", out);
  return false;
}

}  // namespace

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
  // scontrol, our child, is a process of the job, and two signals meant for the job reach it:
  // - `scancel --signal=USR1` reaches every process of the job, and this rank may get it after
  //   another rank already did (the ranks agree on the stop through the all-reduce);
  // - the requeue itself ends the job: slurmstepd sends SIGTERM to all its processes (SIGKILL
  //   KillWait seconds later), which can come before the controller's answer reaches scontrol.
  // So scontrol runs with both ignored (kept across exec) and lives to report the answer.
  const std::string cmd = fmt::format("trap '' USR1 TERM; exec scontrol requeue {} 2>&1", job);
  return requeue_verdict(job, cmd, run_command(cmd), message);
}

}  // namespace dp::launch
