// The basis of the fp32 GPU test's bound (tests/launch/fp32_agreement.h kFp32WeightsBound), in
// CI: the CPU's two correct f32 implementations -- oneDNN's direct convolutions and the reference
// im2col + BLAS kernels -- after the same ten training steps differ by less than the bound the
// GPU's weights are held to (CudaTrainGpu.Fp32GpuWeightsMatchTheCpuRun), at 1 and 2 threads.
// Both are deterministic for a thread count, so each figure is the same on every run of one
// machine; a kernel change that widens the drift past the bound fails here, not on a GPU.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/launch/fp32_agreement.h"

namespace dp::launch {
namespace {

TEST(Fp32Agreement, OneDnnAndReferenceCpuRunsDifferByLessThanTheGpuTestsBound) {
  for (int threads : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << threads << " thread(s)");
    const std::string a = fp32_agreement_root("onednn"), b = fp32_agreement_root("reference");
    const double drift = weights_error(fp32_agreement_run(a, "cpu", "onednn", threads),
                                       fp32_agreement_run(b, "cpu", "reference", threads));
    std::filesystem::remove_all(a);
    std::filesystem::remove_all(b);
    RecordProperty("drift_threads_" + std::to_string(threads), std::to_string(drift));
    EXPECT_LT(drift, kFp32WeightsBound) << "oneDNN against the reference kernels after 10 steps: the rounding "
                                           "drift the GPU test's bound is derived from (fp32_agreement.h)";
  }
}

}  // namespace
}  // namespace dp::launch
