// defines: dptrain_cli, run_cli (launch/cli.h) in-process with stdout and stderr captured, for
// the tests of the command line's outcomes (exit code, the exact lines).
#pragma once
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "launch/cli.h"

namespace dp::launch::testcli {

struct Outcome {
  int code;
  std::string out, err;
};

inline Outcome dptrain_cli(std::vector<std::string> args) {
  std::vector<char*> argv;
  args.insert(args.begin(), "dptrain");
  for (auto& a : args) argv.push_back(a.data());
  testing::internal::CaptureStderr();
  testing::internal::CaptureStdout();
  const int code = run_cli(static_cast<int>(argv.size()), argv.data());
  std::fflush(stdout);
  std::string out = testing::internal::GetCapturedStdout();
  return {code, out, testing::internal::GetCapturedStderr()};
}

}  // namespace dp::launch::testcli
