// defines: Group (a subset of the ranks that runs an algorithm among itself) and RingTopology:
// every rank's node (the bootstrap's node id, which decides who shares memory: mesh.h) and host
// name (for messages), the groups of the hierarchical all-reduce (this node's ranks; one leader
// per node, its lowest rank), and how errors name ranks ("ranks 4-5 on host h3").
//
// Nodes are numbered in the order of their lowest rank; a node's ranks are in rank order. Host
// names are only for people: when every rank reports the same one (one machine, or test nodes
// that share it), messages leave the host out.
#pragma once
#include <string>
#include <vector>

#include "collectives/bootstrap/bootstrap.h"

namespace dp::ring {

struct Group {
  std::vector<int> ranks;  // global ranks, in the group's order
  int me = -1;             // this rank's index in `ranks` (-1: not a member)
  int size() const { return static_cast<int>(ranks.size()); }
  // The global rank of member i, i taken mod size() (ring arithmetic).
  int at(int i) const {
    const int n = size();
    return ranks[static_cast<size_t>(((i % n) + n) % n)];
  }
};
// Ranks 0..size-1, this rank at `rank`.
Group world_group(int rank, int size);

class RingTopology {
 public:
  // Pure. node[r], host[r]: rank r's node id and host name.
  RingTopology(int rank, std::vector<int> node, std::vector<std::string> host);

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(node_.size()); }
  int nodes() const { return static_cast<int>(leaders_.ranks.size()); }
  int node_of(int rank) const { return node_index_[static_cast<size_t>(rank)]; }  // 0-based, in node order
  const std::string& host(int rank) const { return host_[static_cast<size_t>(rank)]; }
  const std::vector<std::string>& hosts() const { return host_; }
  bool several_hosts() const { return several_hosts_; }
  // Several nodes, and some node with several ranks: what the hierarchical all-reduce is for.
  bool hierarchical() const;

  const Group& world() const { return world_; }
  const Group& local() const { return local_; }      // this node's ranks; its leader first
  const Group& leaders() const { return leaders_; }  // each node's lowest rank, in node order
  bool leader() const { return local_.me == 0; }

  // "rank 2", "ranks 4-5"; on several hosts with the hosts: "ranks 4-5 on host h3",
  // "rank 1 on host h1, ranks 4-5 on host h3" (ranks sorted, grouped by host in rank order).
  std::string name(std::vector<int> ranks) const;
  // The hosts of `ranks`, each once.
  int hosts_of(const std::vector<int>& ranks) const;

 private:
  int rank_;
  std::vector<int> node_;
  std::vector<std::string> host_;
  std::vector<int> node_index_;
  bool several_hosts_ = false;
  Group world_, local_, leaders_;
};

// "rank 2", "ranks 4-5", "ranks 0-3, 6-7" (consecutive ranks as ranges, sorted, each once).
std::string rank_list(std::vector<int> ranks);

// Collective over the bootstrap (one allgather): every rank's node id and host name (its
// SLURMD_NODENAME under Slurm, else gethostname(): collectives/bootstrap/common.h's host_key).
RingTopology exchange_topology(Bootstrap& bs);

}  // namespace dp::ring
