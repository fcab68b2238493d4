// The main of every GoogleTest binary: fast BLAS kernels (see kernels/cpu/blas_core.h), quiet
// logs unless DPTRAIN_TEST_LOG is set.
#include <gtest/gtest.h>

#include <cstdlib>

#include "kernels/cpu/blas_core.h"
#include "runtime/log.h"

int main(int argc, char** argv) {
  dp::kernels::cpu::ensure_fast_blas(argv);
  ::testing::InitGoogleTest(&argc, argv);
  const char* lv = std::getenv("DPTRAIN_TEST_LOG");
  dp::log::configure(lv ? lv : "warn");
  return RUN_ALL_TESTS();
}
