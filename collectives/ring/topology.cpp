#include "collectives/ring/topology.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "base/error.h"
#include "collectives/bootstrap/common.h"

namespace dp::ring {

Group world_group(int rank, int size) {
  Group g;
  g.ranks.resize(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) g.ranks[static_cast<size_t>(r)] = r;
  g.me = rank;
  return g;
}

RingTopology::RingTopology(int rank, std::vector<int> node, std::vector<std::string> host)
    : rank_(rank), node_(std::move(node)), host_(std::move(host)) {
  const int n = static_cast<int>(node_.size());
  DP_CHECK(n > 0 && static_cast<int>(host_.size()) == n && rank >= 0 && rank < n,
           "ring topology: rank {} with {} node ids and {} host names", rank, node_.size(), host_.size());
  world_ = world_group(rank, n);
  std::map<int, int> index_of;  // node id -> node index, in the order of the lowest rank
  node_index_.resize(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    auto [it, added] = index_of.emplace(node_[static_cast<size_t>(r)], static_cast<int>(index_of.size()));
    if (added) leaders_.ranks.push_back(r);
    node_index_[static_cast<size_t>(r)] = it->second;
    if (host_[static_cast<size_t>(r)] != host_[0]) several_hosts_ = true;
  }
  for (int r = 0; r < n; ++r)
    if (node_index_[static_cast<size_t>(r)] == node_index_[static_cast<size_t>(rank)]) {
      if (r == rank) local_.me = local_.size();
      local_.ranks.push_back(r);
    }
  leaders_.me = leader() ? node_index_[static_cast<size_t>(rank)] : -1;
}

int RingTopology::hosts_of(const std::vector<int>& ranks) const {
  std::vector<std::string> seen;
  for (int r : ranks)
    if (std::find(seen.begin(), seen.end(), host(r)) == seen.end()) seen.push_back(host(r));
  return static_cast<int>(seen.size());
}

bool RingTopology::hierarchical() const { return nodes() > 1 && nodes() < size(); }

std::string rank_list(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += fmt::format("{}{}", i > 0 ? ", " : "", j > i ? fmt::format("{}-{}", ranks[i], ranks[j]) : std::to_string(ranks[i]));
    i = j + 1;
  }
  return out;
}

std::string RingTopology::name(std::vector<int> ranks) const {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  if (!several_hosts_) return rank_list(ranks);
  // Hosts in the order of their first rank named; each with its ranks.
  std::vector<std::pair<std::string, std::vector<int>>> by_host;
  for (int r : ranks) {
    const std::string& h = host_[static_cast<size_t>(r)];
    auto it = std::find_if(by_host.begin(), by_host.end(), [&](const auto& e) { return e.first == h; });
    if (it == by_host.end()) by_host.push_back({h, {r}});
    else it->second.push_back(r);
  }
  std::string out;
  for (const auto& [h, rs] : by_host) out += fmt::format("{}{} on host {}", out.empty() ? "" : ", ", rank_list(rs), h);
  return out;
}

}  // namespace dp::ring

namespace dp::ring {

RingTopology exchange_topology(Bootstrap& bs) {
  const std::vector<std::string> all = bs.allgather(fmt::format("{}:{}", bs.node_id(), host_key(process_env())));
  DP_CHECK(static_cast<int>(all.size()) == bs.size(), "ring: the bootstrap returned {} host names for {} ranks",
           all.size(), bs.size());
  std::vector<int> node;
  std::vector<std::string> host;
  for (const std::string& a : all) {
    const size_t colon = a.find(':');
    DP_CHECK(colon != std::string::npos, "ring: a rank published '{}' as its node and host (mixed builds?)", a);
    node.push_back(std::atoi(a.substr(0, colon).c_str()));
    host.push_back(a.substr(colon + 1));
  }
  return RingTopology(bs.rank(), std::move(node), std::move(host));
}

}  // namespace dp::ring
