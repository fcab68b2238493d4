// requeue_slurm_job (launch/stop_signals.h) against stand-ins for Slurm's `scontrol` on PATH
// (shell scripts that behave as the real one does in each case):
//   - the requeue ends the job, and Slurm's SIGTERM to every process of the job can reach
//     scontrol before the controller's answer does (integration.test_submit_requeue failed so in
//     CI on 2026-11-30): a SIGTERM, or a late SIGUSR1, does not kill it and the answer counts;
//   - a scontrol killed anyway is reported as such (the signal, what to check), never as "exit -1";
//   - a refusal carries scontrol's exit status and its message;
//   - no job, or a job id that is not a number, runs nothing.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "launch/stop_signals.h"
#include "tests/scoped_env.h"

namespace {

namespace fs = std::filesystem;
using dp::testutil::ScopedEnv;

// A directory holding an executable `scontrol` with `body`, first on PATH for the fixture's life.
class ScontrolOnPath : public ::testing::Test {
 protected:
  void install_scontrol(const std::string& body) {
    dir_ = fs::temp_directory_path() / ("dptrain_requeue_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    const fs::path exe = dir_ / "scontrol";
    std::ofstream(exe) << "#!/bin/sh\n[ \"$1 $2\" = 'requeue 4242' ] || { echo \"bad arguments: $*\"; exit 3; }\n"
                       << body << "\n";
    ::chmod(exe.c_str(), 0755);
    path_.emplace("PATH", dir_.string() + ":" + std::getenv("PATH"));
  }
  void TearDown() override {
    path_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  ScopedEnv job_{"SLURM_JOB_ID", "4242"};

 private:
  fs::path dir_;
  std::optional<ScopedEnv> path_;
};

TEST_F(ScontrolOnPath, TheJobsOwnSigtermAndALateSigusr1DoNotKillScontrolBeforeItAnswers) {
  install_scontrol("kill -TERM $$\nkill -USR1 $$\necho 'Requeued'\nexit 0");
  std::string message;
  EXPECT_TRUE(dp::launch::requeue_slurm_job(message)) << message;
  EXPECT_EQ(message, "job 4242 requeued (scontrol requeue 4242)");
}

TEST_F(ScontrolOnPath, AScontrolKilledBeforeItAnswersIsReportedWithItsSignal) {
  install_scontrol("kill -KILL $$");
  std::string message;
  EXPECT_FALSE(dp::launch::requeue_slurm_job(message));
  EXPECT_EQ(message,
            "'scontrol requeue 4242' was killed by signal 9 (Killed) before it answered: the job may or may not be "
            "requeued (`scontrol show job 4242` counts Restarts); the checkpoint is written, resubmit the job if it "
            "was not");
}

TEST_F(ScontrolOnPath, ARefusalCarriesScontrolsExitStatusAndMessage) {
  install_scontrol("echo 'slurm_requeue error: Requested operation is presently disabled' >&2\nexit 1");
  std::string message;
  EXPECT_FALSE(dp::launch::requeue_slurm_job(message));
  EXPECT_EQ(message,
            "'scontrol requeue 4242' failed (exit 1: slurm_requeue error: Requested operation is presently "
            "disabled); the checkpoint is written, resubmit the job to continue");
}

TEST(Requeue, WithoutAJobOrWithAJobIdThatIsNotANumberNothingRuns) {
  std::string message;
  {
    ScopedEnv job("SLURM_JOB_ID", "");
    EXPECT_FALSE(dp::launch::requeue_slurm_job(message));
    EXPECT_EQ(message, "not a Slurm job (SLURM_JOB_ID is not set): nothing to requeue");
  }
  ScopedEnv job("SLURM_JOB_ID", "12;rm -rf x");
  EXPECT_FALSE(dp::launch::requeue_slurm_job(message));
  EXPECT_EQ(message, "SLURM_JOB_ID = '12;rm -rf x' is not a job number: not requeued");
}

}  // namespace
