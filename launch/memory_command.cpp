#include "launch/memory_command.h"

#include <CLI/CLI.hpp>

#include <cstdio>

#include "launch/config_args.h"
#include "launch/datasets.h"
#include "launch/memory_estimate.h"
#include "launch/size_context.h"
#include "models/build.h"
#include "runtime/device_memory.h"
#include "runtime/log.h"

namespace dp::launch {
namespace {

constexpr int64_t kBatchLimit = int64_t{1} << 24;

size_t device_memory_of(const MemoryArgs& a, bool cuda) {
  if (!a.device_memory.empty()) return parse_memory_size(a.device_memory, "--device-memory");
  const MemoryInfo m = cuda ? device_memory_info(Device::cuda(0)) : host_memory_info();
  if (m.total == 0)
    DP_THROW_USER("--max-batch: cannot read the {}'s memory size here; give it with --device-memory, e.g. "
                  "--device-memory 80GiB",
                  cuda ? "GPU" : "host");
  return static_cast<size_t>(m.total);
}

PlannedCategory largest_category(const MemoryEstimate& e) {
  int best = 0;
  for (int c = 1; c < kPlannedCategories; ++c)
    if (e.bytes[static_cast<size_t>(c)] > e.bytes[static_cast<size_t>(best)]) best = c;
  return static_cast<PlannedCategory>(best);
}

int print_max_batch(const MemoryArgs& a, const Config& cfg, const Graph& g) {
  const bool cuda = estimate_memory(cfg, g, 1, a.world).cuda;
  const size_t memory = device_memory_of(a, cuda);
  auto peak_of = [&](int64_t b) { return estimate_memory(cfg, g, b, a.world).peak; };
  const int64_t best = max_batch_that_fits(peak_of, memory, kBatchLimit);
  if (best == 0) {
    const MemoryEstimate one = estimate_memory(cfg, g, 1, a.world);
    const PlannedCategory c = largest_category(one);
    DP_THROW_USER("{} does not fit in {} bytes ({:.1f} MiB) even at batch 1: the planned peak is {} bytes ({:.1f} MiB), "
                  "the largest category {} with {} bytes ({:.1f} MiB); use a device with more memory, more ranks "
                  "with train.zero = 1, or a smaller model",
                  a.cfg_path, memory, memory / 1048576.0, one.peak, one.peak / 1048576.0, planned_category_name(c),
                  one.at(c), one.at(c) / 1048576.0);
  }
  const size_t peak = peak_of(best);
  if (a.json) std::printf("{\"max_batch\": %lld, \"peak_bytes\": %zu, \"device_memory\": %zu}\n", static_cast<long long>(best), peak, memory);
  else
    std::printf("largest batch per rank that fits in %zu bytes (%.1f MiB): %lld (planned peak %zu bytes, %.1f MiB)\n",
                memory, memory / 1048576.0, static_cast<long long>(best), peak, peak / 1048576.0);
  return 0;
}

}  // namespace

CLI::App* add_memory_command(CLI::App& app, MemoryArgs& a) {
  CLI::App* c = app.add_subcommand(
      "memory", "the planned peak memory per rank of model.cfg's training step, by category, before the run and "
                "without touching a device (a CPU-only build plans a CUDA run from train.device and train.precision)");
  add_config_options(*c, a.cfg_path, a.sets, "model.cfg (TOML)");
  c->add_option("--world", a.world, "ranks of the run (default 1): the optimizer state's shard under train.zero = 1")
      ->check(CLI::Range(1, 1 << 20));
  c->add_flag("--json", a.json, "one JSON object instead of the table");
  c->add_flag("--max-batch", a.max_batch, "print the largest train.batch_size per rank whose plan fits the device");
  c->add_option("--device-memory", a.device_memory,
                "with --max-batch: the device's memory, e.g. 80GiB (default: the GPU's, or the host's for a CPU run)");
  return c;
}

Shape planned_sample_shape(const Config& cfg) {
  const TokenWindows tokens = token_windows_of(cfg.model);
  if (tokens.model_takes_tokens) return {cfg.model.block_size};
  const DataConfig& d = cfg.data;
  switch (d.dataset) {
    case data::DatasetKind::Synthetic: return Shape(d.synthetic_shape.begin(), d.synthetic_shape.end());
    case data::DatasetKind::FashionMnist: return {1, 28, 28};
    case data::DatasetKind::Cifar10: return {3, 32, 32};
    case data::DatasetKind::ImageFolder:
    case data::DatasetKind::TarShards: return {3, d.image_size, d.image_size};
    default: break;
  }
  Datasets ds;
  with_size_context("opening the data", data_size_keys(d), [&] { ds = open_datasets(d, "", tokens); });
  return ds.train.dataset->sample_shape();
}

int memory_command(MemoryArgs a) {
  take_config_from_sets(a.cfg_path, a.sets);  // `--set k=v model.cfg`, as the training command
  if (a.cfg_path.empty()) {
    std::fprintf(stderr, "dptrain: error: no config given; try: dptrain memory models/fmnist_cnn.cfg (see dptrain "
                         "memory --help)\n");
    return 2;
  }
  const Config cfg = load_config(a.cfg_path, a.sets);
  models::validate_model(cfg.model);
  log::configure("warn", "", false, cfg.run.log_levels);  // the report is the output
  std::unique_ptr<Graph> g;
  with_size_context("building the model", model_size_keys(cfg.model), [&] {
    g = models::build_model_for_planning(cfg.model, planned_sample_shape(cfg), static_cast<uint64_t>(cfg.run.seed),
                                         plans_cuda(cfg.train));
  });
  if (a.max_batch) return print_max_batch(a, cfg, *g);
  const MemoryEstimate e = estimate_memory(cfg, *g, cfg.train.batch_size, a.world);
  std::fputs((a.json ? estimate_json(e) + "\n" : estimate_table(e)).c_str(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace dp::launch
