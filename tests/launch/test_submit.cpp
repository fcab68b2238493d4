// dptrain submit: the generated sbatch script byte for byte (golden), the task-count rule
// (one task per GPU; CPU nodes), shell quoting, and exact errors.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "launch/submit.h"
#include "base/error.h"

namespace dp::launch {
namespace {

SbatchJob gpu_job() {
  return {.slurm = {.nodes = 2, .gpus_per_node = 4, .ntasks_per_node = 0, .cpus_per_task = 8, .mem = "64G",
                    .partition = "gpu", .account = "proj42", .qos = "", .time = "04:00:00", .nodelist = "node[01-02]"},
          .job_name = "cnn",
          .workdir = "/home/u/dptrain",
          .run_path = "/scratch/runs/cnn",
          .dptrain = "/home/u/dptrain/build/dptrain",
          .args = {"/home/u/dptrain/models/fmnist_cnn.cfg", "--set", "train.lr=0.01", "--set",
                   "model.preset=\"cnn\"", "--dump-replicas", "--run-dir", "/scratch/runs", "--name", "cnn"}};
}

TEST(Submit, GoldenGpuScript) {
  EXPECT_EQ(sbatch_script(gpu_job()), R"(#!/bin/bash
# Written by `dptrain submit`; submit it again with: sbatch /scratch/runs/cnn/submit.sbatch
# 2 node(s) x 4 task(s), one task per GPU.
# SIGUSR1 90 s before the time limit: dptrain checkpoints, requeues the job and exits;
# the requeued job resumes from the newest checkpoint in /scratch/runs/cnn/checkpoints.
#SBATCH --job-name=cnn
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --gres=gpu:4
#SBATCH --cpus-per-task=8
#SBATCH --mem=64G
#SBATCH --partition=gpu
#SBATCH --account=proj42
#SBATCH --time=04:00:00
#SBATCH --nodelist=node[01-02]
#SBATCH --chdir=/home/u/dptrain
#SBATCH --output=/scratch/runs/cnn/logs/slurm-%j.out
#SBATCH --open-mode=append
#SBATCH --signal=USR1@90
#SBATCH --requeue

srun --mpi=pmix --kill-on-bad-exit=1 --open-mode=append --cpus-per-task=8 \
  --output=/scratch/runs/cnn/logs/slurm-%j-%t.out \
  /home/u/dptrain/build/dptrain /home/u/dptrain/models/fmnist_cnn.cfg --set train.lr=0.01 --set 'model.preset="cnn"' --dump-replicas --run-dir /scratch/runs --name cnn
)");
}

TEST(Submit, GoldenCpuScript) {
  SbatchJob job{.slurm = {},
                .job_name = "default",
                .workdir = "/w",
                .run_path = "/w/runs/default",
                .dptrain = "/opt/dp/dptrain",
                .args = {"/w/m.cfg", "--run-dir", "/w/runs", "--name", "default"}};
  EXPECT_EQ(sbatch_script(job), R"(#!/bin/bash
# Written by `dptrain submit`; submit it again with: sbatch /w/runs/default/submit.sbatch
# 1 node(s) x 1 task(s), CPU nodes.
# SIGUSR1 90 s before the time limit: dptrain checkpoints, requeues the job and exits;
# the requeued job resumes from the newest checkpoint in /w/runs/default/checkpoints.
#SBATCH --job-name=default
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --chdir=/w
#SBATCH --output=/w/runs/default/logs/slurm-%j.out
#SBATCH --open-mode=append
#SBATCH --signal=USR1@90
#SBATCH --requeue

srun --mpi=pmix --kill-on-bad-exit=1 --open-mode=append \
  --output=/w/runs/default/logs/slurm-%j-%t.out \
  /opt/dp/dptrain /w/m.cfg --run-dir /w/runs --name default
)");
}

TEST(Submit, MaxRestartsRunsTheStepInALoop) {
  SbatchJob job{.slurm = {.max_restarts = 2},
                .job_name = "default",
                .workdir = "/w",
                .run_path = "/w/runs/default",
                .dptrain = "/opt/dp/dptrain",
                .args = {"/w/m.cfg", "--name", "default"}};
  const std::string script = sbatch_script(job);
  EXPECT_EQ(script.substr(script.find("#SBATCH --requeue\n") + 18), R"J(
# --max-restarts 2: a failed step (any status but 2, a cfg or input error, and 130 or 143, an
# interrupted or cancelled job) runs again, up to 2 times, from the newest checkpoint.
restarts=0
resume=
while true; do
export DPTRAIN_RESTART_COUNT=$restarts
srun --mpi=pmix --kill-on-bad-exit=1 --open-mode=append \
  --output=/w/runs/default/logs/slurm-%j-%t.out \
  /opt/dp/dptrain /w/m.cfg --name default $resume
status=$?
if [ $status -eq 0 ]; then exit 0; fi
if [ $status -eq 2 ] || [ $status -eq 130 ] || [ $status -eq 143 ]; then
  echo "dptrain submit: the srun step exited with status $status: not restarting"; exit $status
fi
if [ $restarts -ge 2 ]; then
  echo "dptrain submit: the srun step exited with status $status after $restarts restart(s) (--max-restarts 2): giving up"; exit $status
fi
restarts=$((restarts + 1))
resume="--set checkpoint.resume=true"
echo "dptrain submit: the srun step exited with status $status; restart $restarts of 2, from the newest checkpoint"
done
)J");
}

// Runs the --max-restarts script under bash with a stub `srun` that exits with the given statuses
// in turn (printing DPTRAIN_RESTART_COUNT and its last two arguments); returns bash's status and
// output.
std::pair<int, std::string> run_with_stub_srun(int max_restarts, const std::string& statuses) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("dptrain_submit_loop_{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "srun") << "#!/bin/bash\ntail=\"${*: -2}\"\nn=$(cat " << (dir / "n").string()
                              << " 2>/dev/null || echo 0)\necho $((n + 1)) > " << (dir / "n").string() << "\nset -- "
                              << statuses << "\nshift $n\necho \"srun #$n count $DPTRAIN_RESTART_COUNT: $tail\"\n"
                              << "exit ${1:-0}\n";
  fs::permissions(dir / "srun", fs::perms::owner_all);
  SbatchJob job{.slurm = {.max_restarts = max_restarts}, .job_name = "j", .workdir = "/w", .run_path = "/w/r",
                .dptrain = "/bin/true", .args = {"m.cfg"}};
  std::ofstream(dir / "job.sh") << sbatch_script(job);
  const std::string cmd = "PATH=" + dir.string() + ":$PATH bash " + (dir / "job.sh").string() + " > " +
                          (dir / "out").string() + " 2>&1";
  const int st = std::system(cmd.c_str());
  std::ifstream in(dir / "out");
  std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  fs::remove_all(dir);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

TEST(Submit, MaxRestartsScriptRetriesAFailedStepThenSucceeds) {
  const auto [code, out] = run_with_stub_srun(2, "137 0");
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(out, "srun #0 count 0: /bin/true m.cfg\n"
                 "dptrain submit: the srun step exited with status 137; restart 1 of 2, from the newest checkpoint\n"
                 "srun #1 count 1: --set checkpoint.resume=true\n");
}

TEST(Submit, MaxRestartsScriptGivesUpAfterKAndNeverRetriesAnInputError) {
  const auto [code, out] = run_with_stub_srun(1, "1 1 0");
  EXPECT_EQ(code, 1) << out;
  EXPECT_EQ(out, "srun #0 count 0: /bin/true m.cfg\n"
                 "dptrain submit: the srun step exited with status 1; restart 1 of 1, from the newest checkpoint\n"
                 "srun #1 count 1: --set checkpoint.resume=true\n"
                 "dptrain submit: the srun step exited with status 1 after 1 restart(s) (--max-restarts 1): giving up\n");
  const auto [code2, out2] = run_with_stub_srun(3, "2 0");
  EXPECT_EQ(code2, 2) << out2;
  EXPECT_EQ(out2, "srun #0 count 0: /bin/true m.cfg\n"
                  "dptrain submit: the srun step exited with status 2: not restarting\n");
}

TEST(Submit, TasksPerNode) {
  EXPECT_EQ(tasks_per_node({.gpus_per_node = 4}), 4);
  EXPECT_EQ(tasks_per_node({.gpus_per_node = 0}), 1);
  EXPECT_EQ(tasks_per_node({.gpus_per_node = 0, .ntasks_per_node = 16}), 16);
  EXPECT_EQ(tasks_per_node({.gpus_per_node = 4, .ntasks_per_node = 4}), 4);
  try {
    tasks_per_node({.gpus_per_node = 4, .ntasks_per_node = 2});
    FAIL();
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "--ntasks-per-node 2 with --gpus-per-node 4: dptrain runs one task per GPU; leave "
                           "--ntasks-per-node out (or set it to 4)");
  }
}

TEST(Submit, CpuNodesWithSeveralTasks) {
  SbatchJob job = gpu_job();
  job.slurm.gpus_per_node = 0;
  job.slurm.ntasks_per_node = 16;
  const std::string s = sbatch_script(job);
  EXPECT_NE(s.find("#SBATCH --ntasks-per-node=16\n"), std::string::npos);
  EXPECT_EQ(s.find("--gres"), std::string::npos);
  EXPECT_NE(s.find("# 2 node(s) x 16 task(s), CPU nodes.\n"), std::string::npos);
}

TEST(Submit, ShellQuoting) {
  EXPECT_EQ(shell_quote("train.lr=0.01"), "train.lr=0.01");
  EXPECT_EQ(shell_quote("/a/b-c_d.cfg"), "/a/b-c_d.cfg");
  EXPECT_EQ(shell_quote("run.name=\"x\""), "'run.name=\"x\"'");
  EXPECT_EQ(shell_quote("it's $HOME"), "'it'\\''s $HOME'");
  EXPECT_EQ(shell_quote(""), "''");
}

TEST(Submit, WhitespaceInAnSbatchValueIsAnExactError) {
  SbatchJob job = gpu_job();
  job.run_path = "/scratch/my runs/cnn";
  try {
    sbatch_script(job);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(),
                 "run directory '/scratch/my runs/cnn' contains whitespace, which an #SBATCH line cannot hold; "
                 "choose another");
  }
}

}  // namespace
}  // namespace dp::launch
