// defines: what the bootstrap implementations share: the launcher's view of this process
// (LaunchInfo), topology derived from host names (derive_topology), rank-list formatting,
// environment parsing (EnvLookup, env_int) and BootstrapBase.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectives/bootstrap/bootstrap.h"

namespace dp {

// Reads one environment variable (nullptr when unset). Tests pass a map instead of the process
// environment, so every parsing rule is tested without touching it.
using EnvLookup = std::function<const char*(const std::string& name)>;
EnvLookup process_env();

// What a launcher told this process; -1 = not given: derived from the host names in the startup
// exchange (see derive_topology).
struct LaunchInfo {
  int rank = -1, size = -1;
  int local_rank = -1, local_size = -1, node_id = -1;
};

struct Topology {
  int local_rank = 0, local_size = 1, node_id = 0;
};
// Pure. hosts[r] is rank r's host name. Ranks with the same host form a node; nodes are numbered
// in the order of their lowest rank; local ranks follow the global rank order within a node.
Topology derive_topology(const std::vector<std::string>& hosts, int rank);

// The name that groups ranks into nodes: SLURMD_NODENAME when set (two Slurm "nodes" may share
// one host name), else gethostname().
std::string host_key(const EnvLookup& env);

// "rank 2", "ranks 2, 3", "ranks 0-5, 9" (three or more consecutive ranks become a range).
std::string format_ranks(const std::vector<int>& ranks);

// "allgather #3"; "allgather #0 (startup)" for the exchange every bootstrap does when created.
std::string allgather_name(uint64_t seq);

// A rank waiting for the others says so every few seconds, at info level, instead of being silent
// for up to dist.timeout_s: DPTRAIN_RENDEZVOUS_REPORT_S (a tunable, runtime/tunables.h, read here
// through `env` with the launcher's variables, so tests inject it), default 5 s. UserError naming
// the variable for a value that is not a number in [0.1, 3600].
double rendezvous_report_s(const EnvLookup& env);
// Pure. "bootstrap env: rank 1 waiting for ranks 2, 3 (2 of 4 arrived) in allgather #0 (startup):
// 5 s of 300 s".
std::string waiting_line(const std::string& who, int rank, const std::vector<int>& missing, int size,
                         uint64_t seq, double waited_s, double timeout_s);

// The value of `name` as an integer in [lo, hi], `fallback` when unset. UserError naming the
// variable when it is set to anything else. `who` prefixes the message ("bootstrap env").
int env_int(const EnvLookup& env, const std::string& who, const std::string& name, int fallback, int lo, int hi);

// Common state of the implementations: identity, and the startup exchange that fills in what
// the launcher did not say (local rank and size, node id).
class BootstrapBase : public Bootstrap {
 public:
  int rank() const override { return info_.rank; }
  int size() const override { return info_.size; }
  int local_rank() const override { return info_.local_rank; }
  int local_size() const override { return info_.local_size; }
  int node_id() const override { return info_.node_id; }
  const std::string& job_token() const override { return token_; }

 protected:
  explicit BootstrapBase(const LaunchInfo& info, std::string token = "") : info_(info), token_(std::move(token)) {}
  // Call at the end of the derived constructor: allgather #0 of the host key, then derivation.
  // Without a token from the launcher, rank 0 makes one and shares it in the same exchange (the
  // bootstrap's own channel carries it: PMIx/PMI2's key-value store, 0600 files, the store).
  void settle_topology(const std::string& host);
  LaunchInfo info_;
  std::string token_;
};

}  // namespace dp
