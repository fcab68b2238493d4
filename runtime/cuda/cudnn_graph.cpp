// runtime/cuda/cudnn_graph.h on NVIDIA's cudnn-frontend 1.32.0 (header-only; tools/setup.sh
// fetches it, CMake finds it): the only translation unit that includes the frontend, which takes
// ~45 s to compile, so keep the rest of the project out of it. The frontend's JSON serialisation
// is compiled out (CUDNN_FRONTEND_SKIP_JSON_LIB): plans are not serialised, and the project's own
// nlohmann/json stays the only copy in the program.
//
// What the frontend gives that the backend API would need written and tested by hand: graph
// validation and lowering, heuristics queries (modes A, B, the fallback list), numerical-note
// filters, support checks, plan building, variant packs, and the SDPA graphs.
//
// NVRTC: the frontend's experimental open-source RMSNorm+SiLU engine compiles kernels with NVRTC,
// and only runs when a graph asks for heuristics mode OPENSOURCE, which this file never does. So
// its NVRTC calls are weak references: the program links without libnvrtc and does not need it
// at run time (a null call would crash, and none is reachable).
#define CUDNN_FRONTEND_SKIP_JSON_LIB 1
#include <nvrtc.h>
#pragma weak nvrtcCreateProgram
#pragma weak nvrtcDestroyProgram
#pragma weak nvrtcCompileProgram
#pragma weak nvrtcGetProgramLogSize
#pragma weak nvrtcGetProgramLog
#pragma weak nvrtcGetCUBINSize
#pragma weak nvrtcGetCUBIN
#pragma weak nvrtcGetPTXSize
#pragma weak nvrtcGetPTX
#pragma weak nvrtcGetErrorString
#include <cudnn_frontend.h>

#include <algorithm>
#include <unordered_map>

#include "runtime/cuda/check.h"
#include "runtime/cuda/cudnn_graph.h"
#include "runtime/cuda/exec_context.h"
#include "runtime/cuda/stream.h"
#include "runtime/log.h"

namespace fe = cudnn_frontend;

namespace dp::cuda {

struct GraphPlan::Impl {
  PlanKey key;
  std::shared_ptr<fe::graph::Graph> graph;  // holds the built plan (and the other candidates built)
  int64_t index = 0;                        // the chosen plan's index in the graph
  int64_t workspace = 0;                    // bytes
  size_t workspace_limit = 0;               // plan_workspace_limit of the key
  std::string engine;
};

namespace {

using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

fe::DataType_t fe_dtype(DType d) {
  switch (d) {
    case DType::F32: return fe::DataType_t::FLOAT;
    case DType::F16: return fe::DataType_t::HALF;
    case DType::BF16: return fe::DataType_t::BFLOAT16;
    default: throw DpError(fmt::format("cuDNN's graph API: no tensor dtype {} here", dtype_name(d)));
  }
}

fe::NumericalNote_t fe_note(NumericNote n) {
  switch (n) {
    case NumericNote::TensorCore: return fe::NumericalNote_t::TENSOR_CORE;
    case NumericNote::DownConvertInputs: return fe::NumericalNote_t::DOWN_CONVERT_INPUTS;
    case NumericNote::ReducedPrecisionReduction: return fe::NumericalNote_t::REDUCED_PRECISION_REDUCTION;
  }
  return fe::NumericalNote_t::NOT_SET;
}

// Tensor i of a key has uid i + 1 in its graph (0 is the frontend's "unset").
int64_t uid_of(size_t i) { return static_cast<int64_t>(i) + 1; }

std::vector<int64_t> vec(const std::array<int64_t, 4>& a) { return {a.begin(), a.end()}; }

// Tensor i of the key as a graph input.
TensorPtr input(fe::graph::Graph& g, const PlanKey& k, size_t i, const char* name) {
  const GraphTensor& t = k.tensors[i];
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid_of(i))
                      .set_dim(vec(t.dims))
                      .set_stride(vec(t.strides))
                      .set_data_type(fe_dtype(t.dtype))
                      .set_alignment(t.align));
}

// A node's result made the key's tensor i (an output the caller's pointer receives).
void output(const TensorPtr& out, const PlanKey& k, size_t i) {
  const GraphTensor& t = k.tensors[i];
  out->set_output(true)
      .set_uid(uid_of(i))
      .set_dim(vec(t.dims))
      .set_stride(vec(t.strides))
      .set_data_type(fe_dtype(t.dtype))
      .set_alignment(t.align);
}

std::shared_ptr<fe::graph::Graph> new_graph(const PlanKey& k) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe_dtype(k.tensors[0].dtype))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

template <class Attrs>
Attrs geometry(Attrs a, const ConvGeometry& c) {
  a.set_padding({c.pad, c.pad}).set_stride({c.stride, c.stride}).set_dilation({c.dilation, c.dilation});
  a.set_compute_data_type(fe::DataType_t::FLOAT);
  return a;
}

// y = [relu]([conv(x, w)] [+ bias]): the epilogue's pointwise nodes run in f32 on the
// convolution's f32 accumulator, rounded once into y.
void describe_conv_fprop(fe::graph::Graph& g, const PlanKey& k) {
  const bool bias = k.fusion & kFuseBias;
  TensorPtr x = input(g, k, 0, "x"), w = input(g, k, 1, "w");
  TensorPtr y = g.conv_fprop(x, w, geometry(fe::graph::Conv_fprop_attributes().set_name("conv"), k.conv));
  if (bias) {
    TensorPtr b = input(g, k, 2, "bias");
    y = g.pointwise(y, b,
                    fe::graph::Pointwise_attributes()
                        .set_name("bias")
                        .set_mode(fe::PointwiseMode_t::ADD)
                        .set_compute_data_type(fe::DataType_t::FLOAT));
  }
  if (k.fusion & kFuseRelu)
    y = g.pointwise(y, fe::graph::Pointwise_attributes()
                           .set_name("relu")
                           .set_mode(fe::PointwiseMode_t::RELU_FWD)
                           .set_compute_data_type(fe::DataType_t::FLOAT));
  output(y, k, bias ? 3 : 2);
}

void describe_conv_dgrad(fe::graph::Graph& g, const PlanKey& k) {
  TensorPtr dy = input(g, k, 0, "dy"), w = input(g, k, 1, "w");
  output(g.conv_dgrad(dy, w, geometry(fe::graph::Conv_dgrad_attributes().set_name("dgrad"), k.conv)), k, 2);
}

void describe_conv_wgrad(fe::graph::Graph& g, const PlanKey& k) {
  TensorPtr x = input(g, k, 0, "x"), dy = input(g, k, 1, "dy");
  output(g.conv_wgrad(dy, x, geometry(fe::graph::Conv_wgrad_attributes().set_name("wgrad"), k.conv)), k, 2);
}

template <class Attrs>
void causal(Attrs& a, const SdpaOptions& o) {
  if (o.causal) a.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
}

void describe_sdpa_fprop(fe::graph::Graph& g, const PlanKey& k) {
  const bool stats = k.tensors.size() == 5;
  TensorPtr q = input(g, k, 0, "q"), kk = input(g, k, 1, "k"), v = input(g, k, 2, "v");
  auto a = fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(stats).set_attn_scale(k.sdpa.scale);
  causal(a, k.sdpa);
  auto [o, lse] = g.sdpa(q, kk, v, a);
  output(o, k, 3);
  if (stats) output(lse, k, 4);
}

void describe_sdpa_bprop(fe::graph::Graph& g, const PlanKey& k) {
  TensorPtr q = input(g, k, 0, "q"), kk = input(g, k, 1, "k"), v = input(g, k, 2, "v"), o = input(g, k, 3, "o");
  TensorPtr d_o = input(g, k, 4, "do"), lse = input(g, k, 5, "stats");
  // Deterministic: without it cuDNN sums dQ with atomics across key blocks and the same inputs
  // give different bf16 gradients run to run; dptrain promises the same bits.
  auto a = fe::graph::SDPA_backward_attributes()
               .set_name("sdpa_backward")
               .set_attn_scale(k.sdpa.scale)
               .set_deterministic_algorithm(true);
  causal(a, k.sdpa);
  auto [dq, dk, dv] = g.sdpa_backward(q, kk, v, o, d_o, lse, a);
  output(dq, k, 6);
  output(dk, k, 7);
  output(dv, k, 8);
}

// The frontend graph of a (validated) key.
std::shared_ptr<fe::graph::Graph> describe(const PlanKey& k) {
  auto g = new_graph(k);
  switch (k.op) {
    case GraphOp::ConvFprop: describe_conv_fprop(*g, k); break;
    case GraphOp::ConvDgrad: describe_conv_dgrad(*g, k); break;
    case GraphOp::ConvWgrad: describe_conv_wgrad(*g, k); break;
    case GraphOp::SdpaFprop: describe_sdpa_fprop(*g, k); break;
    case GraphOp::SdpaBprop: describe_sdpa_bprop(*g, k); break;
  }
  return g;
}

// The frontend reports most failures as error_t; a few paths throw. Either becomes a message.
template <class F>
std::string attempt(F&& f) {
  try {
    fe::error_t st = f();  // get_message() is not const
    return st.is_good() ? std::string() : st.err_msg;
  } catch (const DpError&) {
    throw;  // ours (a CUDA check): not a candidate's failure
  } catch (const std::exception& e) {
    return e.what();
  }
}

// One description of a tier: its request, its frontend graph and the engine configs the
// heuristics listed for it, in the order they came.
struct Described {
  const PlanRequest* request = nullptr;
  std::shared_ptr<fe::graph::Graph> graph;  // null: the frontend refused the description
  std::vector<EngineCandidate> listed;
  size_t workspace_limit = 0;  // plan_workspace_limit of the request's key
};

EngineCandidate listed_config(const fe::graph::Graph& g, int alternative, int64_t index, HeurSource source) {
  EngineCandidate c;
  c.alternative = alternative;
  c.index = static_cast<int>(index);
  c.source = source;
  std::unordered_map<fe::KnobType_t, int64_t> knobs;
  int64_t engine = -1;
  if (g.get_engine_and_knobs_at_index(index, engine, knobs).is_good()) {
    c.engine = engine;
    for (const auto& [type, value] : knobs) c.knobs.emplace_back(static_cast<int>(type), value);
    std::sort(c.knobs.begin(), c.knobs.end());
  } else {
    c.engine = -2 - index;  // unknown identity: never merged with another config
  }
  return c;
}

// Builds the description's graph and lists its engine configs: heuristics A, then B, then the
// fallback list (a mode that fails is noted and skipped); deselects the engines the key's math
// mode rules out and the configs over the workspace limit. Failures go to `notes`.
Described describe_and_list(ExecContext& gpu, const PlanRequest& r, int alternative, std::vector<std::string>& notes) {
  Described d;
  d.request = &r;
  d.workspace_limit = plan_workspace_limit(r.key, gpu.workspace_limit());
  auto g = describe(r.key);
  const std::string why = attempt([&] {
    fe::error_t st = g->validate();
    return st.is_good() ? g->build_operation_graph(gpu.cudnn()) : st;
  });
  if (!why.empty()) {
    notes.push_back(fmt::format("{}: the frontend refused the graph: {}", r.key.str(), why));
    return d;
  }
  const std::pair<fe::HeurMode_t, HeurSource> modes[] = {
      {fe::HeurMode_t::A, HeurSource::A}, {fe::HeurMode_t::B, HeurSource::B}, {fe::HeurMode_t::FALLBACK, HeurSource::Fallback}};
  for (const auto& [mode, source] : modes) {
    const int64_t before = g->get_execution_plan_count();
    const std::string failed = attempt([&] { return g->create_execution_plans({mode}); });
    if (!failed.empty()) {
      notes.push_back(fmt::format("heuristics {} for {}: {}", heur_source_name(source), r.key.str(), failed));
      continue;
    }
    for (int64_t i = before; i < g->get_execution_plan_count(); ++i) d.listed.push_back(listed_config(*g, alternative, i, source));
  }
  std::vector<fe::NumericalNote_t> ruled_out;
  for (NumericNote n : deselected_notes(r.key.math)) ruled_out.push_back(fe_note(n));
  g->deselect_numeric_notes(ruled_out);
  g->deselect_workspace_greater_than(static_cast<int64_t>(d.workspace_limit));
  d.graph = std::move(g);
  return d;
}

std::unordered_map<int64_t, void*> variant_pack(std::span<void* const> ptrs) {
  std::unordered_map<int64_t, void*> pack;
  for (size_t i = 0; i < ptrs.size(); ++i) pack.emplace(uid_of(i), ptrs[i]);
  return pack;
}

// One warm-up run, then kTimingRepeats runs each between two events on the compute stream; the
// host waits once at the end. Empty with `failure` set when a run is refused.
std::vector<float> time_plan(ExecContext& gpu, const Described& d, int64_t index, int64_t workspace, std::string& failure) {
  std::unordered_map<int64_t, void*> pack = variant_pack(d.request->ptrs);
  void* ws = gpu.workspace(static_cast<size_t>(workspace), d.workspace_limit);
  auto run = [&] { return attempt([&] { return d.graph->execute_plan_at_index(gpu.cudnn(), pack, ws, index); }); };
  if (failure = run(); !failure.empty()) return {};
  std::vector<CudaEvent> start, stop;
  for (int r = 0; r < kTimingRepeats; ++r) {
    start.emplace_back(true);
    stop.emplace_back(true);
    start.back().record(gpu.compute());
    if (failure = run(); !failure.empty()) return {};
    stop.back().record(gpu.compute());
  }
  stop.back().synchronize();
  std::vector<float> ms;
  for (int r = 0; r < kTimingRepeats; ++r) ms.push_back(stop[r].elapsed_ms_since(start[r]));
  return ms;
}

// Builds the candidates of `order` (the support check is the build) until kMaxTimedCandidates
// plans are built, and times each built one. Candidates that fail to build or run are listed
// with the reason; they do not count towards the limit.
std::vector<CandidateTiming> build_and_time(ExecContext& gpu, const std::vector<Described>& descs,
                                            const std::vector<EngineCandidate>& order) {
  std::vector<CandidateTiming> out;
  size_t built = 0;
  for (const EngineCandidate& c : order) {
    if (built == kMaxTimedCandidates) break;
    fe::graph::Graph& g = *descs[static_cast<size_t>(c.alternative)].graph;
    CandidateTiming t{c, "", {}, ""};
    (void)g.get_plan_name_at_index(c.index, t.name);
    if (t.failure = attempt([&] { return g.build_plan_at_index(c.index); }); !t.failure.empty()) {
      out.push_back(std::move(t));
      continue;
    }
    int64_t ws = 0;
    t.failure = attempt([&] { return g.get_workspace_size_plan_at_index(c.index, ws); });
    t.candidate.workspace = ws;
    if (t.failure.empty() && !fits_workspace(t.candidate, descs[static_cast<size_t>(c.alternative)].workspace_limit))
      t.failure = fmt::format("needs {} bytes of workspace", ws);
    if (t.failure.empty()) {
      ++built;
      t.ms = time_plan(gpu, descs[static_cast<size_t>(c.alternative)], c.index, ws, t.failure);
    }
    out.push_back(std::move(t));
  }
  return out;
}

// One tier: every description listed, the candidates built and timed in one order. Null when
// nothing in it runs (the tier's timings and notes are appended for the error).
std::shared_ptr<const GraphPlan> choose_in_tier(ExecContext& gpu, const std::vector<PlanRequest>& tier,
                                                std::vector<CandidateTiming>& tried, std::vector<std::string>& notes) {
  std::vector<Described> descs;
  std::vector<std::vector<EngineCandidate>> ordered;
  size_t listed = 0;
  for (size_t a = 0; a < tier.size(); ++a) {
    descs.push_back(describe_and_list(gpu, tier[a], static_cast<int>(a), notes));
    listed += descs.back().listed.size();
    ordered.push_back(descs.back().graph ? order_candidates(descs.back().listed, descs.back().workspace_limit)
                                         : std::vector<EngineCandidate>{});
  }
  std::vector<CandidateTiming> timings = build_and_time(gpu, descs, interleave_alternatives(ordered));
  const std::optional<TimedChoice> choice = choose_by_timing(timings);
  if (!choice) {
    tried.insert(tried.end(), timings.begin(), timings.end());
    return nullptr;
  }
  const CandidateTiming& won = timings[choice->position];
  const Described& d = descs[static_cast<size_t>(won.candidate.alternative)];
  auto impl = std::make_unique<GraphPlan::Impl>();
  impl->key = d.request->key;
  impl->graph = d.graph;
  impl->index = won.candidate.index;
  impl->workspace = won.candidate.workspace.value_or(0);
  impl->workspace_limit = d.workspace_limit;
  impl->engine = won.name;
  log::get("cudnn")->debug("{}", describe_choice(impl->key, won, choice->median, timings, listed));
  return std::make_shared<const GraphPlan>(std::move(impl));
}

}  // namespace

GraphPlan::GraphPlan(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GraphPlan::~GraphPlan() = default;
const PlanKey& GraphPlan::key() const { return impl_->key; }
int64_t GraphPlan::workspace_bytes() const { return impl_->workspace; }
const std::string& GraphPlan::engine() const { return impl_->engine; }

void GraphPlan::execute(ExecContext& gpu, std::span<void* const> ptrs) const {
  const PlanKey& k = impl_->key;
  DP_CHECK(ptrs.size() == k.tensors.size(), "cuDNN graph plan for {}: {} pointers for {} tensors", k.str(), ptrs.size(),
           k.tensors.size());
  for (size_t i = 0; i < ptrs.size(); ++i)
    DP_CHECK(byte_alignment(ptrs[i]) >= k.tensors[i].align,
             "cuDNN graph plan for {}: tensor {} at {} is less aligned than the {} bytes the plan was chosen for",
             k.str(), i, ptrs[i], k.tensors[i].align);
  std::unordered_map<int64_t, void*> pack = variant_pack(ptrs);
  void* ws = gpu.workspace(static_cast<size_t>(impl_->workspace), impl_->workspace_limit);
  const std::string failed =
      attempt([&] { return impl_->graph->execute_plan_at_index(gpu.cudnn(), pack, ws, impl_->index); });
  if (!failed.empty())
    throw DpError(fmt::format("cuDNN graph plan {} for {} failed [{}]: {}", impl_->engine, k.str(), identity_string(),
                              failed));
}

std::shared_ptr<const GraphPlan> choose_graph_plan(ExecContext& gpu, const std::vector<std::vector<PlanRequest>>& tiers,
                                                   const std::string& who) {
  PlanChoiceKey key;
  for (const auto& tier : tiers) {
    key.tiers.emplace_back();
    for (const PlanRequest& r : tier) {
      const std::string bad = validate_plan_key(r.key);
      DP_CHECK(bad.empty(), "{}: {}", who, bad);
      DP_CHECK(r.ptrs.size() == r.key.tensors.size(), "{}: {} pointers for the {} tensors of {}", who, r.ptrs.size(),
               r.key.tensors.size(), r.key.str());
      key.tiers.back().push_back(r.key);
    }
  }
  return gpu.graph_plans().get(key, gpu.workspace_limit(), [&]() -> std::shared_ptr<const GraphPlan> {
    std::vector<CandidateTiming> tried;
    std::vector<std::string> notes;
    for (const auto& tier : tiers)
      if (auto plan = choose_in_tier(gpu, tier, tried, notes)) return plan;
    size_t limit = gpu.workspace_limit();  // the cap, or the attention backward's own limit
    for (const auto& tier : key.tiers)
      for (const PlanKey& k : tier) limit = std::max(limit, plan_workspace_limit(k, gpu.workspace_limit()));
    throw NoGraphPlan(no_plan_message(who, key, limit, tried, notes));
  });
}

}  // namespace dp::cuda
