#include "runtime/data/brace.h"

#include <cctype>

#include "base/error.h"

namespace dp::data {
namespace {

constexpr size_t kMaxNames = 10'000'000;

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// The alternatives of one group's body: "a..b" (a numeric range, padded to a's width) or a
// comma list.
std::vector<std::string> alternatives(const std::string& body, const std::string& pattern) {
  const size_t dots = body.find("..");
  if (dots != std::string::npos && all_digits(body.substr(0, dots)) && all_digits(body.substr(dots + 2))) {
    const std::string lo = body.substr(0, dots), hi = body.substr(dots + 2);
    if (lo.size() > 18 || hi.size() > 18) DP_THROW_USER("shard pattern '{}': range {{{}}} too long", pattern, body);
    const long long a = std::stoll(lo), b = std::stoll(hi);
    if (b < a) DP_THROW_USER("shard pattern '{}': range {{{}}} is empty (it counts down)", pattern, body);
    if (static_cast<unsigned long long>(b - a) >= kMaxNames)
      DP_THROW_USER("shard pattern '{}': range {{{}}} has more than {} names", pattern, body, kMaxNames);
    std::vector<std::string> out;
    for (long long v = a; v <= b; ++v) {
      std::string s = std::to_string(v);
      if (s.size() < lo.size()) s.insert(0, lo.size() - s.size(), '0');
      out.push_back(std::move(s));
    }
    return out;
  }
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= body.size(); ++i)
    if (i == body.size() || body[i] == ',') {
      out.push_back(body.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

}  // namespace

std::vector<std::string> expand_braces(const std::string& pattern) {
  const size_t open = pattern.find('{');
  if (open == std::string::npos) {
    if (pattern.find('}') != std::string::npos) DP_THROW_USER("shard pattern '{}': '}}' without '{{'", pattern);
    return {pattern};
  }
  const size_t close = pattern.find('}', open);
  if (close == std::string::npos) DP_THROW_USER("shard pattern '{}': '{{' without '}}'", pattern);
  const std::string body = pattern.substr(open + 1, close - open - 1);
  if (body.find('{') != std::string::npos) DP_THROW_USER("shard pattern '{}': nested braces are not supported", pattern);
  const std::string head = pattern.substr(0, open);
  const std::vector<std::string> rest = expand_braces(pattern.substr(close + 1));
  std::vector<std::string> out;
  for (const auto& alt : alternatives(body, pattern)) {
    for (const auto& tail : rest) {
      out.push_back(head + alt + tail);
      if (out.size() > kMaxNames) DP_THROW_USER("shard pattern '{}' expands to more than {} names", pattern, kMaxNames);
    }
  }
  return out;
}

}  // namespace dp::data
