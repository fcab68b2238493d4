// `dptrain submit --min-nodes M` (launch/submit.h): the script's header lines, its checks, and its
// restart loop run under bash with stub Slurm commands (squeue, sinfo, scontrol, srun) and a stub
// dptrain for `record-restart`: a step that loses a node runs again on the others; below M the job
// stops naming the missing node. The real cluster: tests/integration/test_submit_elastic.sh.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <ostream>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "base/error.h"
#include "launch/submit.h"

namespace dp::launch {
namespace {

namespace fs = std::filesystem;

SbatchJob elastic_job(int min_nodes, const std::string& dptrain = "/opt/dp/dptrain") {
  return SbatchJob{.slurm = {.nodes = 4, .max_restarts = 1, .min_nodes = min_nodes},
                   .job_name = "j",
                   .workdir = "/w",
                   .run_path = "/w/r",
                   .dptrain = dptrain,
                   .args = {"m.cfg"}};
}

TEST(SubmitElastic, TheJobAsksForAllNodesWithNoKill) {
  const std::string s = sbatch_script(elastic_job(3));
  EXPECT_NE(s.find("#SBATCH --nodes=4\n#SBATCH --no-kill\n#SBATCH --ntasks-per-node=1\n"), std::string::npos) << s;
  EXPECT_NE(s.find("srun -N $(echo $up | wc -w) -n $(($(echo $up | wc -w) * 1)) --nodelist=$(echo $up | tr ' ' ,) "
                   "--overlap --mpi=pmix --kill-on-bad-exit=1 --open-mode=append \\\n"),
            std::string::npos)
      << s;
  // Without --min-nodes: no --no-kill (Slurm ends the job when a node fails, as before).
  SbatchJob plain = elastic_job(0);
  EXPECT_EQ(sbatch_script(plain).find("--no-kill"), std::string::npos);
}

TEST(SubmitElastic, MinNodesNeedsMaxRestartsAndAtMostNodes) {
  SbatchJob job = elastic_job(3);
  job.slurm.max_restarts = 0;
  try {
    sbatch_script(job);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "--min-nodes 3: the job goes on with fewer nodes by restarting its srun step; give "
                           "--max-restarts K too (K >= 1: how many restarts it may make)");
  }
  try {
    sbatch_script(elastic_job(5));
    FAIL();
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "--min-nodes 5 with --nodes 4: give 1 to 4 (the fewest nodes the job may go on with)");
  }
}

// The script of elastic_job(min_nodes) under bash: the job has h1..h4, all up as far as Slurm
// knows (it has not noticed h3's failure yet); `srun` prints its placement and, the first time,
// kills h3 (the probe step's tasks then start on h1, h2, h4 only) and exits 143, as srun does when
// it gives up waiting for a dead node's tasks; then it exits 0. The stub dptrain prints its
// record-restart arguments.
std::pair<int, std::string> run_with_stub_slurm(int min_nodes) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("dptrain_submit_elastic_{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string d = dir.string();
  auto stub = [&](const std::string& name, const std::string& body) {
    std::ofstream(dir / name) << "#!/bin/bash\n" << body;
    fs::permissions(dir / name, fs::perms::owner_all);
  };
  std::ofstream(dir / "nodes") << "h1,h2,h3,h4\n";
  stub("squeue", "cat " + d + "/nodes\n");
  stub("scontrol", "[ \"$1 $2\" = 'show hostnames' ] && tr , '\\n' <<<\"$3\"\n");
  stub("sinfo", "for n in $(tr , ' ' <<<\"$4\"); do echo \"$n alloc\"; done\n");
  std::ofstream(dir / "alive") << "h1,h2,h3,h4\n";
  stub("srun", "if [ \"${*: -2}\" = 'printenv SLURMD_NODENAME' ]; then tr , '\\n' < " + d + "/alive; exit 1; fi\n"
               "echo \"srun $1 $2 $3 $4 $5 count $DPTRAIN_RESTART_COUNT: ${*: -1}\"\n"
               "if [ ! -f " + d + "/ran ]; then touch " + d + "/ran; echo h1,h2,h4 > " + d + "/alive; exit 143; fi\n");
  stub("dptrain", "echo \"resuming from step 40 (record-restart $*)\"\n");
  std::ofstream(dir / "job.sh") << sbatch_script(elastic_job(min_nodes, d + "/dptrain"));
  const std::string cmd = "SLURM_JOB_ID=7 SLURM_JOB_NODELIST=h1,h2,h3,h4 PATH=" + d + ":$PATH bash " + d +
                          "/job.sh > " + d + "/out 2>&1";
  const int st = std::system(cmd.c_str());
  std::ifstream in(dir / "out");
  std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  fs::remove_all(dir);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

// One run of the script under the stub Slurm: the job's --min-nodes, and the exit code and the
// output expected.
struct StubRun {
  const char* name;
  int min_nodes;
  int code;
  const char* out;
};
void PrintTo(const StubRun& r, std::ostream* os) { *os << r.name; }

class SubmitElasticStub : public testing::TestWithParam<StubRun> {};

TEST_P(SubmitElasticStub, ExitCodeAndOutput) {
  const StubRun& r = GetParam();
  const auto [code, out] = run_with_stub_slurm(r.min_nodes);
  EXPECT_EQ(code, r.code) << out;
  EXPECT_EQ(out, r.out);
}

INSTANTIATE_TEST_SUITE_P(
    SubmitElastic, SubmitElasticStub,
    testing::Values(
        StubRun{"ALostNodeRestartsTheStepOnTheOthers", 3, 0,
                "srun -N 4 -n 4 --nodelist=h1,h2,h3,h4 count 0: m.cfg\n"
                "dptrain submit: host(s) h3 left the job (Slurm: node down or not responding); restart 1 of 1 on 3 "
                "node(s): resuming from step 40 (record-restart record-restart --run /w/r --restart 1 --max-restarts 1 --status 143 "
                "--rank 2 --host h3 --nodes 3 --cause host(s) h3 left the job (Slurm: node down or not responding))\n"
                "srun -N 3 -n 3 --nodelist=h1,h2,h4 count 1: checkpoint.resume=true\n"},
        StubRun{"BelowMinNodesTheJobStopsNamingTheMissingHost", 4, 143,
                "srun -N 4 -n 4 --nodelist=h1,h2,h3,h4 count 0: m.cfg\n"
                "dptrain submit: job 7 has 3 node(s) up (h1 h2 h4); missing: h3 (down or not responding); --min-nodes 4 "
                "needs 4: not restarting. Resubmit once they are back (sbatch /w/r/submit.sbatch), or with a smaller "
                "--min-nodes to go on without them\n"}),
    [](const testing::TestParamInfo<StubRun>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace dp::launch
