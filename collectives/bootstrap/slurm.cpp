// The Slurm env bootstrap: srun without a PMI plugin. srun gives every task SLURM_PROCID,
// SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID and the node list; rank 0 serves the TCP store of the
// env bootstrap on the first host of the step's node list (rank 0 runs there under srun's block
// and cyclic distributions), on a port derived from the job and step ids, so no rank needs to be
// told an address. MASTER_ADDR and MASTER_PORT, when set, override both (e.g. when node names do
// not resolve, or with srun -m arbitrary).
#include <cerrno>
#include <cstdlib>
#include <optional>

#include "collectives/bootstrap/slurm.h"
#include "collectives/bootstrap/env.h"
#include "collectives/bootstrap/hostlist.h"
#include "base/error.h"
#include "runtime/log.h"

namespace dp {

std::optional<uint64_t> slurm_step_id(const EnvLookup& env) {
  const char* s = env("SLURM_STEP_ID");
  if (s == nullptr) s = env("SLURM_STEPID");
  if (s == nullptr || *s < '0' || *s > '9') return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(s, &end, 10);
  // Slurm's special steps (batch script 0xfffffffb, extern, interactive, ...) sit at the top.
  if (*end != '\0' || errno != 0 || v >= 0xfffffff0ull) return std::nullopt;
  return v;
}

namespace {
uint64_t slurm_step_number(const EnvLookup& env) { return slurm_step_id(env).value_or(0); }
}  // namespace

int slurm_store_port(uint64_t job_id, uint64_t step_id) {
  return kSlurmPortBase + static_cast<int>((job_id * 16 + step_id % 16) % kSlurmPortCount);
}

std::unique_ptr<Bootstrap> make_slurm_bootstrap(double timeout_s, const EnvLookup& env, const std::string& iface) {
  const std::string who = "bootstrap slurm";
  std::vector<std::string> missing;
  for (const char* v : {"SLURM_PROCID", "SLURM_NTASKS"})
    if (env(v) == nullptr) missing.push_back(v);
  if (!missing.empty())
    DP_THROW_USER("{}: {} not set (srun sets SLURM_PROCID and SLURM_NTASKS for every task; run under srun)", who,
                  missing.size() == 2 ? "SLURM_PROCID and SLURM_NTASKS are" : missing[0] + " is");
  constexpr int kMax = 1 << 24;
  LaunchInfo info;
  info.size = env_int(env, who, "SLURM_NTASKS", -1, 1, kMax);
  info.rank = env_int(env, who, "SLURM_PROCID", -1, 0, kMax);
  if (info.rank >= info.size)
    DP_THROW_USER("{}: SLURM_PROCID={} is not below SLURM_NTASKS={}", who, info.rank, info.size);
  info.local_rank = env_int(env, who, "SLURM_LOCALID", -1, 0, info.size - 1);
  info.node_id = env_int(env, who, "SLURM_NODEID", -1, 0, kMax);
  // Local size: this node's entry of the step's (else the job's) tasks per node.
  const char* tpn = env("SLURM_STEP_TASKS_PER_NODE");
  if (tpn == nullptr) tpn = env("SLURM_TASKS_PER_NODE");
  if (tpn != nullptr && info.node_id >= 0) {
    std::vector<int> counts;
    try {
      counts = expand_tasks_per_node(tpn);
    } catch (const UserError& e) {
      DP_THROW_USER("{}: {}", who, e.what());
    }
    if (static_cast<size_t>(info.node_id) < counts.size()) info.local_size = counts[static_cast<size_t>(info.node_id)];
  }

  std::string addr;
  if (const char* m = env("MASTER_ADDR"); m && *m) {
    addr = m;
  } else {
    const char* list_var = "SLURM_STEP_NODELIST";
    const char* list = env(list_var);
    for (const char* alt : {"SLURM_JOB_NODELIST", "SLURM_NODELIST"})
      if (list == nullptr && (list = env(alt)) != nullptr) list_var = alt;
    if (list == nullptr)
      DP_THROW_USER("{}: no node list (SLURM_STEP_NODELIST, SLURM_JOB_NODELIST): cannot tell rank 0's host; set "
                    "MASTER_ADDR",
                    who);
    std::vector<std::string> hosts;
    try {
      hosts = expand_hostlist(list);
    } catch (const UserError& e) {
      DP_THROW_USER("{}: {}: {}", who, list_var, e.what());
    }
    if (hosts.empty()) DP_THROW_USER("{}: {}='{}' names no host; set MASTER_ADDR", who, list_var, list);
    addr = hosts.front();
  }
  int port = 0;
  if (env("MASTER_PORT") != nullptr) {
    port = env_int(env, who, "MASTER_PORT", -1, 1, 65535);
  } else {
    if (env("SLURM_JOB_ID") == nullptr)
      DP_THROW_USER("{}: SLURM_JOB_ID is not set: cannot derive the store's port; set MASTER_PORT", who);
    const int job = env_int(env, who, "SLURM_JOB_ID", -1, 0, 2147483647);
    port = slurm_store_port(static_cast<uint64_t>(job), slurm_step_number(env));
  }
  log::get("coll")->debug("{}: rank {} of {}, store at {}:{}", who, info.rank, info.size, addr, port);
  return make_store_bootstrap("slurm", info, store_address(env, addr, port, iface), timeout_s, host_key(env),
                              rendezvous_report_s(env));
}

}  // namespace dp
