#include "runtime/optim/param_groups.h"

#include <fmt/format.h>

#include "runtime/suggest.h"

namespace dp::optim {
namespace {

bool decays(const Arena::Slot& s, DecayParams rule) { return rule == DecayParams::All || s.shape.size() >= 2; }

}  // namespace

std::vector<std::pair<int64_t, int64_t>> decay_skip_spans(const Arena& params, DecayParams rule) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const Arena::Slot& s : params.slots()) {
    if (decays(s, rule) || s.numel == 0) continue;
    if (!out.empty() && out.back().second == s.offset) out.back().second = s.offset + s.numel;
    else out.emplace_back(s.offset, s.offset + s.numel);
  }
  return out;
}

std::string decay_summary(const Arena& params, DecayParams rule, double weight_decay) {
  int64_t on = 0, on_values = 0, off_values = 0;
  std::vector<std::string> off;
  for (const Arena::Slot& s : params.slots()) {
    if (decays(s, rule)) ++on, on_values += s.numel;
    else off.push_back(s.name), off_values += s.numel;
  }
  std::string line = fmt::format("weight decay {} on {} of {} parameters ({} values; train.decay_params = {})",
                                 weight_decay, on, params.size(), on_values, enum_name(rule));
  if (!off.empty()) line += fmt::format("; none on {} ({} values): {}", off.size(), off_values, join(off));
  return line;
}

}  // namespace dp::optim
