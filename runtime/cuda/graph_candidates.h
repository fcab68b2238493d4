// defines: how a cuDNN graph-API plan is chosen, as pure functions of what cuDNN reported and
// what was measured — EngineCandidate (one engine config from the heuristics), order_candidates
// (mode A, then B, then the fallback list; duplicates and configs over the workspace dropped),
// interleave_alternatives (one build order over a tier's descriptions), CandidateTiming and
// choose_by_timing (median of repeats, ties to the earlier candidate, failures skipped),
// no_plan_message; NoGraphPlan; and GraphPlanCache (chosen plans by PlanChoiceKey).
//
// The rule is PyTorch's cudnn.benchmark with the v8 API: ask the heuristics, build at most
// kMaxTimedCandidates plans in heuristic order (torch.backends.cudnn.benchmark_limit's default),
// time each on the real tensors, keep the fastest. runtime/cuda/cudnn_graph.cpp asks cuDNN and
// measures; every decision is made here, so it is tested without a GPU.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/error.h"
#include "runtime/cuda/graph_plan_key.h"

namespace dp::cuda {

// No engine runs any description of a computation (the message: no_plan_message's). Callers with
// another path (the legacy convolution API, an own kernel) catch this one and take it.
class NoGraphPlan : public DpError {
 public:
  using DpError::DpError;
};

// Plans built and timed per choice at most (PyTorch's benchmark_limit default): the first use of
// a shape costs up to this many plan builds and timings per pass.
constexpr size_t kMaxTimedCandidates = 10;
// Timed runs per candidate, after one untimed warm-up run; the median decides.
constexpr int kTimingRepeats = 5;

// The heuristics query an engine config came from, in the order they are asked.
enum class HeurSource : uint8_t { A, B, Fallback };
const char* heur_source_name(HeurSource s);  // "A", "B", "fallback"

struct EngineCandidate {
  int alternative = 0;  // which description of the tier (PlanChoiceKey) it runs
  int index = 0;        // its index among its description's engine configs
  HeurSource source = HeurSource::A;
  int64_t engine = -1;                              // cuDNN's global engine index
  std::vector<std::pair<int, int64_t>> knobs;       // (knob type, choice), sorted by type
  std::optional<int64_t> workspace;                 // bytes, once known (a built plan)
  bool operator==(const EngineCandidate&) const = default;
  // The same engine config: same description, engine and knob choices.
  bool same_config(const EngineCandidate& o) const {
    return alternative == o.alternative && engine == o.engine && knobs == o.knobs;
  }
};

// One description's candidates in build order: mode A's, then B's, then the fallback list's
// (stable within each), the repeats of an engine config dropped (its first listing kept), and
// those whose known workspace exceeds workspace_limit dropped.
std::vector<EngineCandidate> order_candidates(const std::vector<EngineCandidate>& all, size_t workspace_limit);

// One build order over a tier's descriptions: their ordered lists taken in turn, one candidate
// from each (alternative 0 first), so that every description gets its best-ranked configs tried
// before any gets its worse ones.
std::vector<EngineCandidate> interleave_alternatives(const std::vector<std::vector<EngineCandidate>>& ordered);

// True when a built plan's workspace fits (a candidate whose workspace is unknown fits).
bool fits_workspace(const EngineCandidate& c, size_t workspace_limit);

struct CandidateTiming {
  EngineCandidate candidate;
  std::string name;        // cuDNN's engine config name, for logs and errors
  std::vector<float> ms;   // the timed repeats; empty when it failed
  std::string failure;     // why it could not be built or run ("" when it ran)
};

// The median of `ms` (the mean of the middle two for an even count); NaN for none.
double median_ms(std::vector<float> ms);

struct TimedChoice {
  size_t position = 0;  // in the timings' order (the build order)
  double median = 0;    // ms
};
// The candidate with the smallest median; a tie goes to the earlier one (the heuristics' better
// rank), so the decision is a pure function of the measured times. Failed candidates (no times)
// are skipped; nullopt when none ran.
std::optional<TimedChoice> choose_by_timing(const std::vector<CandidateTiming>& timings);

// The error when no description of any tier has a plan that runs: names the layer (`who`), the
// computation, the workspace limit and each candidate's failure, and what to try.
std::string no_plan_message(const std::string& who, const PlanChoiceKey& key, size_t workspace_limit,
                            const std::vector<CandidateTiming>& tried, const std::vector<std::string>& other_failures);

// One debug line about a choice: the winner, its median, the runners-up and how many were tried.
std::string describe_choice(const PlanKey& winner, const CandidateTiming& chosen, double median,
                            const std::vector<CandidateTiming>& timings, size_t listed);

// Chosen plans by PlanChoiceKey, shared by every caller with the same key (the process's one is
// ExecContext::graph_plans, like the legacy algorithm cache is process-wide). Plan: any type with
// `int64_t workspace_bytes() const` (cudnn_graph.h's GraphPlan; tests use a stand-in).
template <class Plan>
class GraphPlanCache {
 public:
  using Make = std::function<std::shared_ptr<const Plan>()>;
  // The cached plan for `key`, or make()'s, cached. A cached plan needing more workspace than
  // workspace_limit (a context with a smaller limit) is made again. A NoGraphPlan from make() is
  // remembered and thrown again for that key and limit (the search is not repeated for every
  // layer of that shape); any other exception caches nothing. The lock is held during make(),
  // so each choice is measured once.
  std::shared_ptr<const Plan> get(const PlanChoiceKey& key, size_t workspace_limit, const Make& make) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = plans_.find(key);
        it != plans_.end() && static_cast<size_t>(it->second->workspace_bytes()) <= workspace_limit)
      return it->second;
    if (auto it = none_.find(key); it != none_.end() && it->second.first == workspace_limit)
      throw NoGraphPlan(it->second.second);
    try {
      std::shared_ptr<const Plan> p = make();
      plans_[key] = p;
      return p;
    } catch (const NoGraphPlan& e) {
      none_[key] = {workspace_limit, e.what()};
      throw;
    }
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return plans_.size();
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<PlanChoiceKey, std::shared_ptr<const Plan>, PlanChoiceKeyHash> plans_;
  // Keys nothing ran, with the workspace limit of that search and its message.
  std::unordered_map<PlanChoiceKey, std::pair<size_t, std::string>, PlanChoiceKeyHash> none_;
};

}  // namespace dp::cuda
