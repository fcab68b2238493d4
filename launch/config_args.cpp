#include "launch/config_args.h"

#include <CLI/CLI.hpp>

namespace dp::launch {

void add_config_options(CLI::App& app, std::string& cfg_path, std::vector<std::string>& sets,
                        const std::string& config_help) {
  app.add_option("config", cfg_path, config_help);
  app.add_option("--set", sets, "override a cfg key: section.key=value (repeatable)")->take_all();
}

void take_config_from_sets(std::string& cfg_path, std::vector<std::string>& sets) {
  if (!cfg_path.empty()) return;
  for (auto it = sets.begin(); it != sets.end(); ++it) {
    if (it->find('=') != std::string::npos) continue;
    cfg_path = *it;
    sets.erase(it);
    return;
  }
}

}  // namespace dp::launch
