#include "launch/memory_estimate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "base/quoted.h"
#include "collectives/reducer/reducer.h"
#include "collectives/reducer/zero_memory.h"
#include "launch/batch_feed.h"
#include "launch/datasets.h"
#include "launch/train_setup.h"
#include "runtime/device_memory.h"
#include "runtime/enum_names.h"
#include "runtime/step_memory.h"

namespace dp::launch {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kAlignment = 256;  // the planned arena's offsets (as the input-gradient arena's)


DType compute_dtype(Precision p) {
  return p == Precision::Bf16 ? DType::BF16 : p == Precision::Fp16 ? DType::F16 : DType::F32;
}

// Optimizer state elements per parameter: SGD's momentum buffer, AdamW's two moments.
int64_t state_per_element(const TrainConfig& t) {
  if (t.optimizer == optim::OptimizerKind::AdamW) return 2;
  return t.momentum != 0 ? 1 : 0;
}

// The parameter layers in backward order (the graph's nodes last to first), each with the slots
// its backward writes (its own and the tied ones) and those it reports ready to the Reducer.
std::vector<ZeroBackwardNode> backward_writes(const Graph& g) {
  std::vector<ZeroBackwardNode> out;
  for (auto n = g.nodes().rbegin(); n != g.nodes().rend(); ++n)
    if (!n->bound_slots.empty()) out.push_back({n->bound_slots, n->param_slots});
  return out;
}

std::vector<int64_t> slot_numel(const Graph& g) {
  std::vector<int64_t> out;
  for (const auto& s : g.grads().slots()) out.push_back(s.numel);
  return out;
}

// What train.zero shards on this rank (collectives/reducer/zero_memory.h, over the buckets the
// Reducer cuts): the optimizer state, the fp32 master weights, the fp32 gradient arena.
ZeroRankBytes zero_bytes(const Config& cfg, const Graph& g, int world, bool mixed) {
  const ReducerOptions ro = reducer_options_of(cfg.dist, nullptr);
  return zero_rank_bytes(reducer_buckets(g, ro),
                         ZeroMemoryQuery{.zero = static_cast<int>(cfg.train.zero),
                                         .world = world,
                                         .arena_elements = g.num_parameters(),
                                         .state_per_element = state_per_element(cfg.train),
                                         .master_weights = mixed,
                                         .overlap = ro.overlap,
                                         .accumulates = cfg.train.accum_steps > 1,
                                         .slot_numel = slot_numel(g),
                                         .backward = backward_writes(g)});
}

size_t buffer_bytes(const Graph& g) {
  size_t b = 0;
  for (const auto& t : g.buffers()) b += t.tensor.nbytes();
  return b;
}

// The input pipeline's buffers. On the CPU the loader's host batches (f32 samples and i32 labels;
// token windows: i32 inputs and targets), as many as the feed holds during a step
// (feed_host_batches: its prefetch and the step's own): what the account's `input` measures. On a
// GPU the device's: the model input and its labels (token targets), and the two upload slots of raw
// batches (bytes for IDX, CIFAR-10 and decoded images, f32 otherwise; token windows of T + 1
// uint16; none for batches made on the device).
size_t input_bytes(const Config& cfg, const Graph& g, int64_t batch, bool cuda, DType act, int local_ranks) {
  const size_t sample = static_cast<size_t>(shape_numel(g.input_shape()));
  const size_t B = static_cast<size_t>(batch);
  const bool tokens = token_windows_of(cfg.model).model_takes_tokens;
  if (!cuda) {
    const data::BatchFormat format = tokens ? data::BatchFormat::Tokens : data::BatchFormat::Transformed;
    return static_cast<size_t>(feed_host_batches(loader_workers(cfg.data, local_ranks))) *
           data::batch_bytes(format, static_cast<int64_t>(sample), batch);
  }
  if (tokens) return B * sample * 2 * sizeof(int32_t) + 2 * B * (sample + 1) * sizeof(uint16_t);
  size_t b = B * sample * dtype_size(act) + B * sizeof(int64_t);
  const data::DatasetKind k = cfg.data.dataset;
  if (k == data::DatasetKind::Synthetic && cfg.data.synthetic_device == data::SyntheticDevice::Cuda) return b;
  const bool raw_bytes = k != data::DatasetKind::Synthetic && k != data::DatasetKind::Npy;
  return b + 2 * B * (sample * (raw_bytes ? 1 : 4) + sizeof(int64_t));
}

// library_workspace: the step plan's (the attention backward's need, planned above the cap).
void fill_static(MemoryEstimate& e, const Config& cfg, const Graph& g, DType act, size_t library_workspace) {
  using C = PlannedCategory;
  const size_t P = static_cast<size_t>(g.num_parameters());
  const bool mixed = act != DType::F32;
  auto& b = e.bytes;
  b[static_cast<size_t>(C::Parameters)] = (mixed ? P * dtype_size(act) : P * 4) + buffer_bytes(g);
  const ZeroRankBytes z = zero_bytes(cfg, g, e.world, mixed);
  b[static_cast<size_t>(C::MasterWeights)] = z.master_weights;
  b[static_cast<size_t>(C::Gradients)] = z.gradients + (mixed ? P * dtype_size(act) : 0);  // the 16-bit ones whole
  b[static_cast<size_t>(C::OptimizerState)] = z.optimizer_state;
  const size_t cap = static_cast<size_t>(cfg.train.workspace_mb) * kMiB;
  b[static_cast<size_t>(C::Workspace)] = e.cuda ? std::max(cap, library_workspace) : 0;
  const bool compressed = cfg.dist.compress != GradCompress::None;
  b[static_cast<size_t>(C::Buckets)] = e.world > 1 && compressed ? P * 2 : 0;
}

std::vector<LargeTensor> largest_of(const StepMemoryPlan& p, const Graph& g, size_t count) {
  std::vector<LargeTensor> all;
  for (const PlanTensor& t : p.tensors)
    all.push_back({t.name, t.node >= 0 ? g.nodes()[static_cast<size_t>(t.node)].layer->name() : "", t.bytes});
  std::stable_sort(all.begin(), all.end(), [](const LargeTensor& a, const LargeTensor& b) { return a.bytes > b.bytes; });
  if (all.size() > count) all.resize(count);
  return all;
}

}  // namespace

// train.device "auto" plans what training would pick: a GPU when this machine has one (the
// driver's device count; nothing is allocated), else the CPU.
bool plans_cuda(const TrainConfig& t) {
  if (t.device == cuda::DeviceRequest::Cuda) return true;
  if (t.device == cuda::DeviceRequest::Cpu) return false;
  return cuda_device_count() > 0;
}

const char* planned_category_name(PlannedCategory c) {
  static constexpr const char* kNames[] = {"parameters", "gradients", "optimizer_state", "master_weights",
                                           "activations", "workspace", "buckets", "input", "other"};
  return kNames[static_cast<int>(c)];
}

MemoryEstimate estimate_memory(const Config& cfg, const Graph& g, int64_t batch, int world, int local_ranks) {
  MemoryEstimate e;
  e.cuda = plans_cuda(cfg.train);
  e.precision = std::string(enum_name(cfg.train.precision));
  e.batch_size = batch;
  e.world = world;
  const DType act = e.cuda ? compute_dtype(cfg.train.precision) : DType::F32;
  const MemoryPath path = e.cuda ? MemoryPath::Cuda
                          : cfg.train.cpu_backend == CpuBackend::OneDnn ? MemoryPath::CpuOnednn
                                                                        : MemoryPath::CpuReference;
  StepMemoryQuery q{.batch = batch, .activations = act, .path = path, .alignment = kAlignment};
  q.fusion = device_fusion_plan(g, path, act, cfg.train.gpu_fusion, cfg.train.cudnn_api == cuda::CudnnApi::Graph);
  const StepMemoryPlan plan = plan_step_memory(g, q);
  fill_static(e, cfg, g, act, plan.library_workspace);
  e.bytes[static_cast<size_t>(PlannedCategory::Activations)] = plan.packing.arena_bytes;
  e.bytes[static_cast<size_t>(PlannedCategory::Input)] = input_bytes(cfg, g, batch, e.cuda, act, local_ranks);
  for (size_t b : e.bytes) e.peak += b;
  e.largest = largest_of(plan, g, 10);
  return e;
}

std::string estimate_json(const MemoryEstimate& e) {
  std::string cats;
  for (int c = 0; c < kPlannedCategories; ++c)
    cats += fmt::format("{}\"{}\": {}", c ? ", " : "", planned_category_name(static_cast<PlannedCategory>(c)),
                        e.bytes[static_cast<size_t>(c)]);
  std::string largest;
  for (size_t i = 0; i < e.largest.size(); ++i)
    largest += fmt::format("{}{{\"name\": {}, \"layer\": {}, \"bytes\": {}}}", i ? ", " : "",
                           quoted_string(e.largest[i].name), quoted_string(e.largest[i].layer), e.largest[i].bytes);
  return fmt::format(
      "{{\"device\": \"{}\", \"precision\": \"{}\", \"batch_size\": {}, \"world\": {}, \"peak_bytes\": {}, "
      "\"categories\": {{{}}}, \"largest\": [{}]}}",
      e.cuda ? "cuda:0" : "cpu", e.precision, e.batch_size, e.world, e.peak, cats, largest);
}

std::string estimate_table(const MemoryEstimate& e) {
  std::string s = fmt::format("planned peak per rank: {} {}, batch {} per rank, {} rank(s)\n",
                              e.cuda ? "cuda:0" : "cpu", e.precision, e.batch_size, e.world);
  s += fmt::format("  {:<16} {:>16} {:>11} {:>6}\n", "category", "bytes", "MiB", "share");
  for (int c = 0; c < kPlannedCategories; ++c) {
    const size_t b = e.bytes[static_cast<size_t>(c)];
    s += fmt::format("  {:<16} {:>16} {:>11.1f} {:>5.1f}%\n", planned_category_name(static_cast<PlannedCategory>(c)),
                     b, b / double(kMiB), e.peak ? 100.0 * b / e.peak : 0.0);
  }
  s += fmt::format("  {:<16} {:>16} {:>11.1f}\n", "total (peak)", e.peak, e.peak / double(kMiB));
  s += "largest planned tensors:\n";
  for (const LargeTensor& t : e.largest)
    s += fmt::format("  {:<40} {:<28} {:>11.1f} MiB\n", t.name, t.layer, t.bytes / double(kMiB));
  return s;
}

int64_t max_batch_that_fits(const std::function<size_t(int64_t)>& peak_of, size_t memory, int64_t limit) {
  if (limit < 1 || peak_of(1) > memory) return 0;
  int64_t lo = 1, hi = 2;  // peak_of(lo) fits; hi is a candidate
  while (hi <= limit && peak_of(hi) <= memory) lo = hi, hi = std::min(limit + 1, hi * 2);
  hi = std::min(hi, limit + 1);  // peak_of(hi) does not fit, or hi is past the limit
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (peak_of(mid) <= memory) lo = mid;
    else hi = mid;
  }
  return lo;
}

size_t parse_memory_size(std::string_view s, const char* flag) {
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  const size_t start = i;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  const std::string number(s.substr(start, i - start));
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  std::string unit(s.substr(i));
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static constexpr std::pair<const char*, double> kUnits[] = {
      {"", 1},        {"b", 1},          {"k", 1024.0},  {"kib", 1024.0},  {"kb", 1e3},  {"m", 1048576.0},
      {"mib", 1048576.0}, {"mb", 1e6},   {"g", 1073741824.0}, {"gib", 1073741824.0}, {"gb", 1e9},
      {"t", 1099511627776.0}, {"tib", 1099511627776.0}, {"tb", 1e12}};
  double scale = 0;
  for (const auto& [name, f] : kUnits)
    if (unit == name) scale = f;
  char* end = nullptr;
  const double v = number.empty() ? -1 : std::strtod(number.c_str(), &end);
  if (scale == 0 || v <= 0 || end != number.c_str() + number.size())
    DP_THROW_USER("{} {}: not a memory size; give a number and a unit, e.g. 80GiB, 141GB or 81920MiB", flag, s);
  return static_cast<size_t>(v * scale);
}

}  // namespace dp::launch
