#include "launch/cli.h"

#include <CLI/CLI.hpp>

namespace dp::launch {
int run_cli(int argc, char** argv) {
  CLI::App app{"dptrain: data-parallel training"};
  CLI11_PARSE(app, argc, argv);
  return 0;
}
}  // namespace dp::launch
