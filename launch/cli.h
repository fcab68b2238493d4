// defines: run_cli, the dptrain command line (parsing, dispatch, error reporting), and the
// model.cfg argument with its --set overrides, parsed alike by every command that reads a cfg.
#pragma once
#include <string>
#include <vector>

#include "launch/exit_status.h"  // the exit statuses it returns

namespace CLI {
class App;
}

namespace dp::launch {
int run_cli(int argc, char** argv);

// A command's model.cfg argument (config_help: what the cfg is to that command) and its
// repeatable --set section.key=value overrides, in order.
void add_config_options(CLI::App& app, std::string& cfg_path, std::vector<std::string>& sets,
                        const std::string& config_help);

// `--set k=v model.cfg`: --set takes every value up to the next option (so that `--set a=1 b=2`
// works), which swallows a config given after it. A --set value without '=' is no override: when
// no config was given otherwise, that value is the config.
void take_config_from_sets(std::string& cfg_path, std::vector<std::string>& sets);

}  // namespace dp::launch
