// The main of every GoogleTest binary: quiet logs unless DPTRAIN_TEST_LOG is set.
#include <gtest/gtest.h>

#include <cstdlib>

#include "runtime/log.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const char* lv = std::getenv("DPTRAIN_TEST_LOG");
  dp::log::configure(lv ? lv : "warn");
  return RUN_ALL_TESTS();
}
