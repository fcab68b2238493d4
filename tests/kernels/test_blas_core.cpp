// OpenBLAS core selection: a pure decision, tested on feature sets rather than this CPU.
#include <gtest/gtest.h>

#include "kernels/cpu/blas_core.h"

namespace dp::kernels::cpu {
namespace {

TEST(BlasCore, OverridesOnlyGenericFallbacks) {
  CpuFeatures avx512{true, true, true, true, true, true};
  CpuFeatures avx2{true, true, false, false, false, false};
  CpuFeatures sse{};
  EXPECT_EQ(preferred_openblas_core("Prescott", avx512), "SkylakeX");
  EXPECT_EQ(preferred_openblas_core("Prescott", avx2), "Haswell");
  EXPECT_EQ(preferred_openblas_core("Prescott", sse), "");
  EXPECT_EQ(preferred_openblas_core("Haswell", avx512), "");     // a specific choice stays
  EXPECT_EQ(preferred_openblas_core("Zen", avx2), "");
  EXPECT_EQ(preferred_openblas_core("SkylakeX", avx512), "");
  CpuFeatures partial512{true, true, true, false, false, false};  // avx512f alone is not SkylakeX
  EXPECT_EQ(preferred_openblas_core("Prescott", partial512), "Haswell");
}

TEST(BlasCore, ThisProcessRunsTheFastestKernelsAvailable) {
  // test_main re-executes with OPENBLAS_CORETYPE when OpenBLAS fell back to a generic core.
  EXPECT_EQ(preferred_openblas_core(openblas_core(), cpu_features()), "") << "core " << openblas_core();
}

}  // namespace
}  // namespace dp::kernels::cpu
