// defines: the local launcher's restart decisions (dptrain --nproc N --max-restarts K), as pure
// functions: how a worker ended (WorkerExit), which of several ended workers caused the failure
// (failure_cause), whether the job starts again (restart_verdict), the words of the launcher's
// lines (describe_exit, signal_name), and the arguments a restarted worker gets (restart_args).
//
// The exit-status contract (launch/cli.h): 0 done; 2 (kExitUserError) a cfg or input error,
// the same on every attempt, so never retried; 3 (kExitCommunicationFailed) a peer or the
// network failed, a consequence of another rank's failure when one failed too; 4 the GPU ran out
// of memory; 1 any other failure; 127 the worker could not be executed (never retried either);
// 128 + n killed by signal n.
#pragma once
#include <string>
#include <vector>

namespace dp::launch {

struct WorkerExit {
  int rank = -1;
  int status = 0;  // the exit code, or 128 + the signal's number
  int signal = 0;  // the signal that killed it; 0 when it exited
};

// Pure. From a waitpid status.
WorkerExit worker_exit_of(int rank, int raw_status);

// Pure. "SIGKILL" (or "signal 64" for one without a name).
std::string signal_name(int sig);

// Pure. "exited with status 2" / "was killed by signal 9 (SIGKILL)".
std::string describe_exit(const WorkerExit& e);

// Pure. Of the failed workers seen at the same moment (non-empty, in rank order), the one that
// caused the failure: a worker that did not report a peer's failure (status 3) before one that
// did, else the first.
WorkerExit failure_cause(const std::vector<WorkerExit>& failed);

// Pure. Whether starting again may help: not for a cfg or input error (status 2) nor a worker that
// could not be executed (127).
bool worth_retrying(const WorkerExit& e);

enum class RestartVerdict {
  Restart,        // start all workers again
  NotRetriable,   // the failure is the same on every attempt (worth_retrying is false)
  Exhausted,      // max_restarts restarts were made already
  StopRequested,  // the launcher was asked to stop (SIGINT, SIGTERM): the failure may be the stop itself
};

// Pure. After the failure `e` of the job's launch number restarts_done + 1.
RestartVerdict restart_verdict(const WorkerExit& e, int restarts_done, int max_restarts, bool stop_requested);

// Pure. The arguments of a restarted worker: the first launch's without --reset (a restart
// resumes; it never starts over), plus --set checkpoint.resume=true (even where the cfg starts
// every run fresh, a restart continues this one).
std::vector<std::string> restart_args(const std::vector<std::string>& first_args);

}  // namespace dp::launch
