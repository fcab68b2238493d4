// defines: add_config_options and take_config_from_sets — the model.cfg argument and its --set
// overrides, parsed alike by every dptrain command that reads a cfg (training, submit, eval,
// predict, sample, memory).
#pragma once
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace dp::launch {

// A command's model.cfg argument (config_help: what the cfg is to that command) and its
// repeatable --set section.key=value overrides, in order.
void add_config_options(CLI::App& app, std::string& cfg_path, std::vector<std::string>& sets,
                        const std::string& config_help);

// `--set k=v model.cfg`: --set takes every value up to the next option (so that `--set a=1 b=2`
// works), which swallows a config given after it. A --set value without '=' is no override: when
// no config was given otherwise, that value is the config.
void take_config_from_sets(std::string& cfg_path, std::vector<std::string>& sets);

}  // namespace dp::launch
