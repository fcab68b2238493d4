// The rule that keeps every GPU test in the GPU run (tests/gpu_test.h): gtest's filter syntax as
// the runbook's filter is matched ('*', '?', ':' alternatives, '-' negatives, parameterised
// names), the decision a GPU test takes on a host without enough GPUs (run, skip with the reason,
// or fail when the runbook's filter would leave it out), the filter in tools/gpu/gtest_filter.txt
// against the names the macros produce, and -- through this binary run again as a child -- that
// a misnamed GPU test fails here, in CI, with the message that says what to do. (The test
// harness has no folder of its own in the source tree; base/ is the cheapest binary.)
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/gpu_test.h"

namespace dp::gputest {
namespace {

TEST(GpuTestRule, GlobMatchIsGtestsWildcards) {
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("*", "Suite.Name"));
  EXPECT_TRUE(glob_match("Suite.Name", "Suite.Name"));
  EXPECT_FALSE(glob_match("Suite.Name", "Suite.Name2"));
  EXPECT_FALSE(glob_match("Suite.Name2", "Suite.Name"));
  EXPECT_FALSE(glob_match("", "x"));
  EXPECT_TRUE(glob_match("Suite.?ame", "Suite.Name"));
  EXPECT_FALSE(glob_match("Suite.?ame", "Suite.ame"));
  EXPECT_TRUE(glob_match("*Gpu.*", "CudaLayersGpu.MatchCpuTwin"));
  EXPECT_TRUE(glob_match("*Gpu.*", "AllLayers/CudaLayersGpu.MatchCpuTwin/conv_k3_p1_bf16"));  // '*' crosses '/'
  EXPECT_TRUE(glob_match("*Gpu.*", "Gpu.X.Gpu.Y"));                                        // backtracking
  EXPECT_FALSE(glob_match("*Gpu.*", "CudaLayers.MatchCpuTwin"));
  EXPECT_FALSE(glob_match("*Gpu.*", "BnGpuPath.CudnnTrains"));
  EXPECT_FALSE(glob_match("*Gpu.*", "NcclGpuAssignment.ARankWithoutAGpuIsNamed"));
  EXPECT_TRUE(glob_match("a*b*c", "aXXbYYc"));
  EXPECT_FALSE(glob_match("a*b*c", "aXXbYY"));
  EXPECT_TRUE(glob_match("**", "anything"));
}

TEST(GpuTestRule, FilterSelectsLikeGtestFilter) {
  // ':' alternatives.
  EXPECT_TRUE(filter_selects("*Cuda*:*Gpu.*", "CudaTrain.X"));
  EXPECT_TRUE(filter_selects("*Cuda*:*Gpu.*", "ReducerGpu.X"));
  EXPECT_FALSE(filter_selects("*Cuda*:*Gpu.*", "RingDevice.X"));
  // '-' negatives, after the positives or alone (then everything else is selected).
  EXPECT_FALSE(filter_selects("*Gpu.*-ReducerGpu.*", "ReducerGpu.X"));
  EXPECT_TRUE(filter_selects("*Gpu.*-ReducerGpu.*", "LtMatmulGpu.X"));
  EXPECT_FALSE(filter_selects("*Gpu.*-ReducerGpu.*:LtMatmul*", "LtMatmulGpu.X"));
  EXPECT_TRUE(filter_selects("-ReducerGpu.*", "Anything.X"));
  EXPECT_FALSE(filter_selects("-ReducerGpu.*", "ReducerGpu.X"));
  EXPECT_TRUE(filter_selects("", "Anything.X"));
  // run_all.sh's hand-written default before issue 20 missed these (and selected the third by a
  // word in its test name).
  const char* old_default = "*Cuda*:*DeviceChoice*:*Nccl*:*LossScaler*";
  EXPECT_FALSE(filter_selects(old_default, "ReducerGpu.MatchesTheCpuReducerOverTheRingOn2Ranks"));
  EXPECT_FALSE(filter_selects(old_default, "DeviceInputGpu.RefusesWhatDoesNotFit"));
  EXPECT_TRUE(filter_selects(old_default, "ReducerGpu.MatchesTheCpuReducerOverNcclOnOneGpu"));
}

TEST(GpuTestRule, TheRunbookFilterSelectsWhatTheMacrosNameAndNothingElse) {
  // The names DP_GPU_TEST, DP_GPUS_TEST, DP_GPU_TEST_F and DP_GPU_TEST_P give (suites end in Gpu).
  for (const char* name : {"CudaResourcesGpu.AnotherStreamWaitsOnAnEvent", "NcclCommunicator2Gpu.ARankThatNeverJoins",
                           "AllLayers/CudaLayersGpu.MatchCpuTwin/conv_k3_p1_bf16", "Precisions/CudaDdpGpu.X/0",
                           "DeviceInputGpu.RefusesWhatDoesNotFit"})
    EXPECT_TRUE(filter_selects(kRunbookFilter, name)) << name << " with " << kRunbookFilter;
  // CPU tests, whatever "Gpu" they hold elsewhere in the name.
  for (const char* name : {"BnGpuPath.CudnnTrains", "ReducerGpuModel.HasOneBucketPerLayer",
                           "NcclGpuAssignment.ARankWithoutAGpuIsNamed", "CudaLayers.MatchCpuTwin",
                           "Fp32Agreement.OneDnnAndReferenceCpuRunsDifferByLessThanTheGpuTestsBound"})
    EXPECT_FALSE(filter_selects(kRunbookFilter, name)) << name << " with " << kRunbookFilter;
  static_assert(ends_with_gpu("CudaLayersGpu") && ends_with_gpu("NcclCommunicator2Gpu"));
  static_assert(!ends_with_gpu("Gpu") && !ends_with_gpu("BnGpuPath") && !ends_with_gpu("CudaLayers"));
}

TEST(GpuTestRule, TheGateRunsSkipsWithTheReasonOrFailsAMisnamedTest) {
  EXPECT_EQ(gate(1, 1, "LtMatmulGpu.X", "*Gpu.*").kind, Gate::Run);
  EXPECT_EQ(gate(2, 8, "NcclCommunicator2Gpu.X", "*Gpu.*").kind, Gate::Run);
  const Gate none = gate(1, 0, "LtMatmulGpu.X", "*Gpu.*");
  EXPECT_EQ(none.kind, Gate::Skip);
  EXPECT_EQ(none.message, "no GPU");
  const Gate one = gate(2, 1, "NcclCommunicator2Gpu.X", "*Gpu.*");
  EXPECT_EQ(one.kind, Gate::Skip);
  EXPECT_EQ(one.message, "needs 2 GPUs; this host has 1");
  // A test the filter leaves out fails wherever it lacks GPUs (CI: everywhere) ...
  const Gate misnamed = gate(1, 0, "CudaLayers.MatchCpuTwin", "*Gpu.*");
  EXPECT_EQ(misnamed.kind, Gate::Fail);
  EXPECT_EQ(misnamed.message,
            "CudaLayers.MatchCpuTwin needs a GPU, but the GPU runbook's gtest filter \"*Gpu.*\" "
            "(tools/gpu/gtest_filter.txt) does not select it, so no GPU run would run it: define it with "
            "DP_GPU_TEST / DP_GPU_TEST_F / DP_GPU_TEST_P (tests/gpu_test.h) under a suite name ending in Gpu");
  EXPECT_EQ(gate(2, 1, "NcclCommunicator.X", "*Gpu.*").kind, Gate::Fail);
  // ... and runs where the GPUs are.
  EXPECT_EQ(gate(1, 1, "CudaLayers.MatchCpuTwin", "*Gpu.*").kind, Gate::Run);
}

// Two deliberately gated tests, run only by the test below in a child (DISABLED_ keeps them out of
// every ordinary run): one properly named, one under a suite the filter leaves out -- written
// with TEST_F and an alias, as nothing but a hand-made test can be, since the macros refuse the
// name at compile time. Both need more GPUs than any host has.
using GpuTestRuleGpu = GpuFixture<1000>;
using GpuTestRuleMisnamed = GpuFixture<1000>;
TEST_F(GpuTestRuleGpu, DISABLED_NeedsAThousandGpus) { ADD_FAILURE() << "ran without a thousand GPUs"; }
TEST_F(GpuTestRuleMisnamed, DISABLED_NeedsAThousandGpus) { ADD_FAILURE() << "ran without a thousand GPUs"; }

// This binary again, running only `filter` (disabled tests included); its exit code and output.
std::pair<int, std::string> run_self(const std::string& filter) {
  const auto out = std::filesystem::temp_directory_path() / ("dptrain_gpu_rule_" + std::to_string(::getpid()));
  const std::string cmd = std::filesystem::read_symlink("/proc/self/exe").string() +
                          " --gtest_also_run_disabled_tests --gtest_filter='" + filter + "' > " + out.string() + " 2>&1";
  const int st = std::system(cmd.c_str());
  std::stringstream text;
  text << std::ifstream(out).rdbuf();
  std::filesystem::remove(out);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, text.str()};
}

TEST(GpuTestRule, AGpuTestOutsideTheRunbooksFilterFailsInCi) {
  const auto [named_rc, named] = run_self("GpuTestRuleGpu.*");
  EXPECT_EQ(named_rc, 0) << named;
  EXPECT_NE(named.find("needs 1000 GPUs; this host has "), std::string::npos) << named;
  EXPECT_NE(named.find("[  SKIPPED ] GpuTestRuleGpu.DISABLED_NeedsAThousandGpus"), std::string::npos) << named;

  const auto [misnamed_rc, misnamed] = run_self("GpuTestRuleMisnamed.*");
  EXPECT_NE(misnamed_rc, 0) << misnamed;
  EXPECT_NE(misnamed.find("GpuTestRuleMisnamed.DISABLED_NeedsAThousandGpus needs a GPU, but the GPU runbook's gtest "
                          "filter \"" + std::string(kRunbookFilter) + "\" (tools/gpu/gtest_filter.txt) does not "
                          "select it"),
            std::string::npos)
      << misnamed;
  EXPECT_NE(misnamed.find("[  FAILED  ] GpuTestRuleMisnamed.DISABLED_NeedsAThousandGpus"), std::string::npos)
      << misnamed;
  EXPECT_EQ(misnamed.find("ran without a thousand GPUs"), std::string::npos) << "the body ran: " << misnamed;
}

}  // namespace
}  // namespace dp::gputest
