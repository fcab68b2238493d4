// The main of every GoogleTest binary: the CPU libraries' environment (kernels/cpu/cpu_env.h), quiet
// logs unless DPTRAIN_TEST_LOG is set.
#include <gtest/gtest.h>

#include <cstdlib>

#include "kernels/cpu/cpu_env.h"
#include "runtime/log.h"

int main(int argc, char** argv) {
  dp::kernels::cpu::ensure_cpu_env(argv);
  ::testing::InitGoogleTest(&argc, argv);
  const char* lv = std::getenv("DPTRAIN_TEST_LOG");
  dp::log::configure(lv ? lv : "warn");
  return RUN_ALL_TESTS();
}
