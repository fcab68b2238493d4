// defines: MemoryEstimate and estimate_memory, what `dptrain memory` reports: the planned
// per-rank peak of a training step before the run, by category (parameters, gradients, optimizer
// state, fp32 master weights, activations packed by the step plan, the GPU workspace cap,
// communication buckets, the input pipeline's buffers, other), the total and the largest tensors;
// its JSON and its table; max_batch_that_fits, the bisection of the largest batch whose plan fits;
// and parse_memory_size ("80GiB"). Nothing here touches a device: a CPU-only build plans a CUDA
// run from the cfg's device and precision, with the layers' declarations for the CUDA path.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/config.h"
#include "runtime/graph.h"

namespace dp::launch {

// The categories, in the order of the report and of the JSON's "categories".
enum class PlannedCategory : int { Parameters, Gradients, OptimizerState, MasterWeights, Activations, Workspace,
                                   Buckets, Input, Other, Count };
constexpr int kPlannedCategories = static_cast<int>(PlannedCategory::Count);
const char* planned_category_name(PlannedCategory c);  // "parameters", ..., "optimizer_state", ...

struct LargeTensor {
  std::string name, layer;
  size_t bytes = 0;
};

struct MemoryEstimate {
  bool cuda = false;           // "cuda:0" or "cpu"
  std::string precision;       // "fp32", "bf16", "fp16"
  int64_t batch_size = 0;
  int world = 1;
  std::array<size_t, kPlannedCategories> bytes{};
  size_t peak = 0;             // the sum of the categories
  std::vector<LargeTensor> largest;  // the 10 largest planned tensors, largest first
  size_t at(PlannedCategory c) const { return bytes[static_cast<size_t>(c)]; }
};

// The plan of cfg's training step at `batch` per rank on `world` ranks, for model `g` (built on
// the CPU from cfg.model; its shapes are all that is read). The device: train.device "cuda", or
// "auto" on a machine with a GPU; else the CPU. train.zero on world > 1 shards the optimizer state
// and the fp32 master weights, at 2 the fp32 gradients too (collectives/reducer/zero_memory.h).
// local_ranks: the ranks on this node, which share its cores among their loaders' threads
// (loader_workers; data.workers = 0 on images), so a CPU run's input: 1 plans the most threads.
MemoryEstimate estimate_memory(const Config& cfg, const Graph& g, int64_t batch, int world, int local_ranks = 1);
// Whether the estimate is for a GPU: train.device "cuda", or "auto" on a machine that has one. The
// graph given to estimate_memory is then built with a GPU run's layer choices
// (models::build_model_for_planning: the padded LM head).
bool plans_cuda(const TrainConfig& t);

// {"device": .., "precision": .., "batch_size": B, "world": N, "peak_bytes": P, "categories": {..},
//  "largest": [{"name": .., "layer": .., "bytes": ..}, ..]}
std::string estimate_json(const MemoryEstimate& e);
// One row per category (bytes, MiB, share), the total, then the largest tensors.
std::string estimate_table(const MemoryEstimate& e);

// The largest batch in [1, limit] whose peak_of(batch) <= memory (peak_of grows with the batch),
// by doubling then bisection; 0 when even batch 1 does not fit. Pure.
int64_t max_batch_that_fits(const std::function<size_t(int64_t)>& peak_of, size_t memory, int64_t limit);

// "80GiB", "80 GB", "81920MiB", "512M", "1073741824": bytes (K/M/G/T are binary, KB/MB/GB/TB
// decimal, KiB.. binary). UserError naming the flag for anything else.
size_t parse_memory_size(std::string_view s, const char* flag);

}  // namespace dp::launch
