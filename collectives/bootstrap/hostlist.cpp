#include "collectives/bootstrap/hostlist.h"

#include <cctype>
#include <cstdint>

#include "base/error.h"

namespace dp {
namespace {

constexpr size_t kMaxHosts = 1000000;

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// One bracket's numbers, formatted ("01-03,07" -> 01 02 03 07).
std::vector<std::string> expand_bracket(const std::string& list, const std::string& inner) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= inner.size()) {
    size_t comma = inner.find(',', start);
    if (comma == std::string::npos) comma = inner.size();
    const std::string part = inner.substr(start, comma - start);
    const size_t dash = part.find('-');
    const std::string lo_s = dash == std::string::npos ? part : part.substr(0, dash);
    const std::string hi_s = dash == std::string::npos ? part : part.substr(dash + 1);
    if (!all_digits(lo_s) || !all_digits(hi_s) || lo_s.size() > 18 || hi_s.size() > 18)
      DP_THROW_USER("hostlist '{}': '{}' in [{}] is not a number or a range lo-hi", list, part, inner);
    const uint64_t lo = std::stoull(lo_s), hi = std::stoull(hi_s);
    if (lo > hi) DP_THROW_USER("hostlist '{}': range '{}' goes backwards", list, part);
    if (hi - lo >= kMaxHosts) DP_THROW_USER("hostlist '{}': range '{}' is too large", list, part);
    const int width = lo_s.size() > 1 && lo_s[0] == '0' ? static_cast<int>(lo_s.size()) : 0;
    for (uint64_t v = lo; v <= hi; ++v) out.push_back(fmt::format("{:0{}}", v, width));
    start = comma + 1;
  }
  return out;
}

// One item: literal text and brackets, expanded as the product (leftmost bracket slowest).
void expand_item(const std::string& list, const std::string& item, std::vector<std::string>& out) {
  std::vector<std::string> acc = {""};
  size_t i = 0;
  while (i < item.size()) {
    const size_t open = item.find('[', i);
    const std::string text = item.substr(i, open == std::string::npos ? std::string::npos : open - i);
    if (text.find(']') != std::string::npos) DP_THROW_USER("hostlist '{}': ']' without '['", list);
    for (auto& a : acc) a += text;
    if (open == std::string::npos) break;
    const size_t close = item.find(']', open);
    if (close == std::string::npos) DP_THROW_USER("hostlist '{}': '[' without ']'", list);
    const std::string inner = item.substr(open + 1, close - open - 1);
    if (inner.find('[') != std::string::npos) DP_THROW_USER("hostlist '{}': nested '['", list);
    const auto nums = expand_bracket(list, inner);
    if (acc.size() * nums.size() > kMaxHosts) DP_THROW_USER("hostlist '{}': more than {} hosts", list, kMaxHosts);
    std::vector<std::string> next;
    next.reserve(acc.size() * nums.size());
    for (const auto& a : acc)
      for (const auto& n : nums) next.push_back(a + n);
    acc = std::move(next);
    i = close + 1;
  }
  if (out.size() + acc.size() > kMaxHosts) DP_THROW_USER("hostlist '{}': more than {} hosts", list, kMaxHosts);
  out.insert(out.end(), acc.begin(), acc.end());
}

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& list) {
  std::vector<std::string> out;
  std::string item;
  int depth = 0;
  auto flush = [&] {
    if (!item.empty()) expand_item(list, item, out);
    item.clear();
  };
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0) DP_THROW_USER("hostlist '{}': ']' without '['", list);
    if (depth == 0 && (c == ',' || std::isspace(static_cast<unsigned char>(c)))) {
      flush();
      continue;
    }
    item += c;
  }
  if (depth != 0) DP_THROW_USER("hostlist '{}': '[' without ']'", list);
  flush();
  return out;
}

std::vector<int> expand_tasks_per_node(const std::string& spec) {
  std::vector<int> out;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    if (comma == std::string::npos) comma = spec.size();
    const std::string part = spec.substr(start, comma - start);
    std::string count = part, reps = "1";
    if (const size_t p = part.find("(x"); p != std::string::npos) {
      if (part.back() != ')') DP_THROW_USER("SLURM_TASKS_PER_NODE '{}': '{}' is not N or N(xR)", spec, part);
      count = part.substr(0, p);
      reps = part.substr(p + 2, part.size() - p - 3);
    }
    if (!all_digits(count) || !all_digits(reps) || count.size() > 9 || reps.size() > 7)
      DP_THROW_USER("SLURM_TASKS_PER_NODE '{}': '{}' is not N or N(xR)", spec, part);
    const int n = std::stoi(count), r = std::stoi(reps);
    if (out.size() + static_cast<size_t>(r) > kMaxHosts)
      DP_THROW_USER("SLURM_TASKS_PER_NODE '{}': more than {} nodes", spec, kMaxHosts);
    out.insert(out.end(), static_cast<size_t>(r), n);
    start = comma + 1;
  }
  return out;
}

}  // namespace dp
