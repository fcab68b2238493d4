#include "collectives/nccl/gpu_assignment.h"

#include <fmt/format.h>

#include <cstdlib>
#include <map>
#include <utility>

namespace dp::nccl {
namespace {

std::vector<std::string> split_tabs(const std::string& s) {
  std::vector<std::string> out(1);
  for (char c : s) {
    if (c == '\t') out.emplace_back();
    else out.back() += c;
  }
  return out;
}

bool parse_int(const std::string& s, int* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  long v = std::strtol(s.c_str(), &end, 10);
  if (*end != '\0') return false;
  *out = static_cast<int>(v);
  return true;
}

}  // namespace

std::string encode_gpu_identity(const GpuIdentity& g) {
  return fmt::format("dpgpu1\t{}\t{}\t{}\t{}\t{}", g.host, g.device, g.visible, g.uuid, g.pci_bus_id);
}

std::optional<GpuIdentity> parse_gpu_identity(const std::string& blob) {
  const auto f = split_tabs(blob);
  if (f.size() != 6 || f[0] != "dpgpu1") return std::nullopt;
  GpuIdentity g;
  g.host = f[1];
  if (!parse_int(f[2], &g.device) || !parse_int(f[3], &g.visible)) return std::nullopt;
  g.uuid = f[4];
  g.pci_bus_id = f[5];
  return g;
}

std::string gpu_assignment_error(const std::vector<GpuIdentity>& ranks) {
  for (size_t r = 0; r < ranks.size(); ++r)
    if (ranks[r].visible <= 0 || ranks[r].uuid.empty())
      return fmt::format("nccl backend: rank {} on host {} sees no CUDA device (no GPU, no driver, or "
                         "CUDA_VISIBLE_DEVICES hides them all); use dist.backend = \"ring\" without GPUs",
                         r, ranks[r].host);
  // (host, uuid) -> ranks, in rank order; the first GPU (by lowest rank) with two or more.
  std::map<std::pair<std::string, std::string>, std::vector<int>> users;
  for (size_t r = 0; r < ranks.size(); ++r) users[{ranks[r].host, ranks[r].uuid}].push_back(static_cast<int>(r));
  const std::vector<int>* worst = nullptr;
  for (const auto& [key, rs] : users)
    if (rs.size() > 1 && (!worst || rs.front() < worst->front())) worst = &rs;
  if (!worst) return "";
  const GpuIdentity& g = ranks[static_cast<size_t>(worst->front())];
  std::string who;
  for (size_t i = 0; i < worst->size(); ++i)
    who += fmt::format("{}{}", i == 0 ? "" : i + 1 == worst->size() ? " and " : ", ", (*worst)[i]);
  return fmt::format(
      "nccl backend: ranks {} on host {} {} use GPU {} ({}, PCI {}); NCCL needs one GPU per rank: start at most {} "
      "rank{} per node there (it shows {} GPU{}), or give each rank its own GPU with CUDA_VISIBLE_DEVICES",
      who, g.host, worst->size() == 2 ? "both" : "all", g.device, g.uuid, g.pci_bus_id, g.visible,
      g.visible == 1 ? "" : "s", g.visible, g.visible == 1 ? "" : "s");
}


}  // namespace dp::nccl
