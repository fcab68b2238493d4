#include "launch/telemetry/step_range.h"

#include <cctype>

#include "base/error.h"

namespace dp::metrics {
namespace {
// A whole number >= 1 with optional spaces around it; false otherwise.
bool parse_step(const std::string& t, int64_t& out) {
  size_t b = t.find_first_not_of(' '), e = t.find_last_not_of(' ');
  if (b == std::string::npos) return false;
  const std::string d = t.substr(b, e - b + 1);
  if (d.size() > 18) return false;
  for (char c : d)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  out = std::stoll(d);
  return out >= 1;
}
}  // namespace

StepRange parse_step_range(const std::string& text, const std::string& key) {
  if (text.find_first_not_of(' ') == std::string::npos) return {};
  const auto dash = text.find('-');
  StepRange r;
  bool ok;
  if (dash == std::string::npos) {
    ok = parse_step(text, r.first);
    r.last = r.first;
  } else {
    ok = parse_step(text.substr(0, dash), r.first) && parse_step(text.substr(dash + 1), r.last) && r.first <= r.last;
  }
  if (!ok)
    DP_THROW_USER("{} = \"{}\": expected \"A-B\" with whole steps 1 <= A <= B (e.g. \"100-110\"), or \"\" for off",
                  key, text);
  return r;
}

}  // namespace dp::metrics
