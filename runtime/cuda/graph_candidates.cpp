#include "runtime/cuda/graph_candidates.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"

namespace dp::cuda {

const char* heur_source_name(HeurSource s) {
  switch (s) {
    case HeurSource::A: return "A";
    case HeurSource::B: return "B";
    case HeurSource::Fallback: return "fallback";
  }
  return "?";
}

bool fits_workspace(const EngineCandidate& c, size_t workspace_limit) {
  return !c.workspace || (*c.workspace >= 0 && static_cast<uint64_t>(*c.workspace) <= workspace_limit);
}

std::vector<EngineCandidate> order_candidates(const std::vector<EngineCandidate>& all, size_t workspace_limit) {
  std::vector<EngineCandidate> by_source = all;
  std::stable_sort(by_source.begin(), by_source.end(),
                   [](const EngineCandidate& a, const EngineCandidate& b) { return a.source < b.source; });
  std::vector<EngineCandidate> out;
  for (const EngineCandidate& c : by_source) {
    if (!fits_workspace(c, workspace_limit)) continue;
    const bool repeat =
        std::any_of(out.begin(), out.end(), [&](const EngineCandidate& o) { return o.same_config(c); });
    if (!repeat) out.push_back(c);
  }
  return out;
}

std::vector<EngineCandidate> interleave_alternatives(const std::vector<std::vector<EngineCandidate>>& ordered) {
  std::vector<EngineCandidate> out;
  for (size_t rank = 0;; ++rank) {
    bool any = false;
    for (const auto& list : ordered) {
      if (rank >= list.size()) continue;
      out.push_back(list[rank]);
      any = true;
    }
    if (!any) return out;
  }
}

double median_ms(std::vector<float> ms) {
  if (ms.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  return n % 2 == 1 ? ms[n / 2] : (static_cast<double>(ms[n / 2 - 1]) + ms[n / 2]) / 2;
}

std::optional<TimedChoice> choose_by_timing(const std::vector<CandidateTiming>& timings) {
  std::optional<TimedChoice> best;
  for (size_t i = 0; i < timings.size(); ++i) {
    if (timings[i].ms.empty() || !timings[i].failure.empty()) continue;
    const double m = median_ms(timings[i].ms);
    if (!std::isfinite(m)) continue;
    if (!best || m < best->median) best = TimedChoice{i, m};  // strict: a tie keeps the earlier
  }
  return best;
}

namespace {
std::string candidate_label(const CandidateTiming& t) {
  const std::string name = t.name.empty() ? fmt::format("engine {}", t.candidate.engine) : t.name;
  return fmt::format("{} (heuristics {}{})", name, heur_source_name(t.candidate.source),
                     t.candidate.alternative > 0 ? fmt::format(", description {}", t.candidate.alternative + 1) : "");
}
}  // namespace

std::string no_plan_message(const std::string& who, const PlanChoiceKey& key, size_t workspace_limit,
                            const std::vector<CandidateTiming>& tried, const std::vector<std::string>& other_failures) {
  std::string why;
  for (const CandidateTiming& t : tried)
    why += fmt::format("; {}: {}", candidate_label(t), t.failure.empty() ? "no time measured" : t.failure);
  for (const std::string& f : other_failures) why += "; " + f;
  if (why.empty()) why = "; cuDNN listed no engine config";
  return fmt::format(
      "{}: no cuDNN graph-API plan runs {} within the workspace limit of {:.1f} MiB [{}]{}; try a larger "
      "train.workspace_mb, or train.cudnn_api = \"legacy\"",
      who, key.str(), static_cast<double>(workspace_limit) / (1 << 20), identity_string(), why);
}

std::string describe_choice(const PlanKey& winner, const CandidateTiming& chosen, double median,
                            const std::vector<CandidateTiming>& timings, size_t listed) {
  size_t ran = 0, failed = 0;
  std::string others;
  for (const CandidateTiming& t : timings) {
    if (t.ms.empty() || !t.failure.empty()) {
      ++failed;
      continue;
    }
    ++ran;
    if (&t == &chosen || others.size() > 400) continue;
    others += fmt::format("{}{} {:.3f} ms", others.empty() ? "" : ", ", t.name, median_ms(t.ms));
  }
  return fmt::format("{}: {} ({:.3f} ms, median of {}; workspace {} bytes) from {} timed, {} failed, {} listed{}{}",
                     winner.str(), candidate_label(chosen), median, chosen.ms.size(), chosen.candidate.workspace.value_or(0),
                     ran, failed, listed, others.empty() ? "" : "; others: ", others);
}

}  // namespace dp::cuda
