#include "launch/cli.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>

#include "launch/local_launcher.h"
#include "launch/trainer.h"
#include "models/build.h"
#include "models/presets.h"
#include "models/registry.h"
#include "runtime/config.h"
#include "runtime/log.h"
#include "runtime/suggest.h"

namespace dp::launch {

namespace {
// The workers' arguments: ours without --nproc (so that a worker never launches again).
std::vector<std::string> worker_args(int argc, char** argv) {
  std::vector<std::string> out;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--nproc") ++i;
    else if (a.rfind("--nproc=", 0) != 0) out.push_back(a);
  }
  return out;
}
}  // namespace

int run_cli(int argc, char** argv) {
  CLI::App app{"dptrain: data-parallel training of convolutional networks, CPU or CUDA.\n"
               "  dptrain model.cfg                     train (one process; GPU if present, else CPU)\n"
               "  dptrain model.cfg --set train.lr=0.01 override any cfg key\n"
               "  dptrain --nproc 4 model.cfg           4 local processes (env bootstrap)"};
  app.set_version_flag("--version", "dptrain 0.1.0");
  std::string cfg_path;
  std::vector<std::string> overrides;
  std::string name, run_dir, log_level;
  bool reference = false, list_layers = false, reset = false;
  int nproc = 1;
  app.add_option("config", cfg_path, "model.cfg (TOML), e.g. models/fmnist_cnn.cfg");
  app.add_option("--set", overrides, "override a cfg key: section.key=value (repeatable)")->take_all();
  app.add_option("--name", name, "run name (run.name): the run directory is <run.dir>/<name>");
  app.add_option("--run-dir", run_dir, "root folder of run directories (run.dir)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off (run.log_level)");
  app.add_option("--nproc", nproc, "launch N local worker processes (each line of their output prefixed '[rank r] ')")
      ->check(CLI::Range(1, 1024));
  app.add_flag("--print-config-reference", reference, "print every cfg key (Markdown) and exit");
  app.add_flag("--list-layers", list_layers, "print the layer types and their keys, and the presets, and exit");
  app.add_flag("--reset", reset, "start over: delete the run directory's checkpoints instead of resuming from them");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  // --nproc N: this process launches N workers (our arguments minus --nproc) and supervises
  // them, after checking once what can be checked (the cfg). The launcher's variables in our
  // environment mean we are a worker already.
  const bool launcher = nproc > 1 && std::getenv("RANK") == nullptr;
  if (nproc > 1 && !launcher)
    std::fprintf(stderr, "dptrain: --nproc %d ignored: this process is a worker already (RANK is set)\n", nproc);
  try {
    if (launcher && (reference || list_layers)) return run_local(nproc, worker_args(argc, argv));
    if (reference) {
      std::fputs(config_reference().c_str(), stdout);
      return 0;
    }
    if (list_layers) {
      const auto& reg = models::layer_registry();
      for (const auto& t : reg.types()) {
        std::vector<std::string> keys;
        for (const auto& a : reg.arg_specs(t)) keys.push_back(a.name + (a.default_value ? "" : " (required)"));
        std::printf("%-16s %s\n", t.c_str(), join(keys).c_str());
      }
      std::printf("presets: %s\n", join(models::preset_names()).c_str());
      return 0;
    }
    if (cfg_path.empty()) {
      std::fprintf(stderr, "dptrain: error: no config given; try: dptrain models/fmnist_cnn.cfg (see --help)\n");
      return 2;
    }
    if (!name.empty()) overrides.push_back("run.name=\"" + name + "\"");
    if (!run_dir.empty()) overrides.push_back("run.dir=\"" + run_dir + "\"");
    if (!log_level.empty()) overrides.push_back("run.log_level=\"" + log_level + "\"");
    Config cfg = load_config(cfg_path, overrides);
    models::validate_model(cfg.model);
    if (launcher) return run_local(nproc, worker_args(argc, argv));
    log::configure(cfg.run.log_level);
    train(cfg, TrainOptions{.reset = reset});
    return 0;
  } catch (const UserError& e) {
    std::fprintf(stderr, "dptrain: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dptrain: error: %s\n", e.what());
    return 1;
  }
}

}  // namespace dp::launch
