#include "launch/check_config.h"

#include <stdlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "launch/datasets.h"
#include "launch/size_context.h"
#include "launch/train_setup.h"
#include "runtime/data/token_dataset.h"
#include "models/build.h"
#include "runtime/enum_names.h"

namespace dp::launch {

namespace {
// A scratch folder under $TMPDIR, removed with everything in it: tar shards are indexed there, so
// that --check writes no index into the run folder or the current folder.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "dptrain-check-XXXXXX").string();
    DP_CHECK(::mkdtemp(tmpl.data()) != nullptr, "cannot create a scratch folder {}: {}", tmpl, std::strerror(errno));
    path = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
};
}  // namespace

int check_config(const Config& cfg, const std::string& cfg_path) {
  Datasets ds;
  const ScratchDir scratch;
  with_size_context("opening the data", data_size_keys(cfg.data), [&] {
    ds = open_datasets(cfg.data, scratch.path + "/tar-index", token_windows_of(cfg.model));
  });
  // Training reads token shards lazily (runtime/data/token_dataset.h); --check reads every token.
  // Synthetic token windows are below the vocabulary by construction: nothing to read.
  if (ds.tokens() && cfg.data.dataset == data::DatasetKind::Tokens) {
    data::scan_token_vocabulary(*ds.train.dataset);
    data::scan_token_vocabulary(*ds.eval.dataset);
  }
  std::unique_ptr<Graph> model;
  // On the CPU whatever train.device says: the shapes and the parameter count are the same.
  with_size_context("building the model", model_size_keys(cfg.model), [&] {
    model = models::build_model(cfg.model, ds.train.dataset->sample_shape(), static_cast<uint64_t>(cfg.run.seed));
  });
  if (ds.tokens()) check_model_fits_data(*model, cfg.model.vocab_size, cfg.model.block_size);
  else check_model_fits_data(*model, ds.train.dataset->num_classes());
  make_optimizer(cfg.train, model->params());
  std::printf("%s: ok (nothing written)\n", cfg_path.c_str());
  std::printf("data: train %s (%zu samples used), eval %zu samples\n", ds.train.dataset->describe().c_str(),
              ds.train.indices.size(), ds.eval.indices.size());
  std::printf("model %s: %lld parameters (%.2f MB in f32)\n",
              cfg.model.preset == PresetKind::None ? "from the [[layer]] list" : enum_name(cfg.model.preset).data(),
              static_cast<long long>(model->num_parameters()), model->num_parameters() * 4 / 1e6);
  std::fputs(model->summary().c_str(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace dp::launch
