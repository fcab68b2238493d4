#include "collectives/bootstrap.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <map>

#include "collectives/bootstraps.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/suggest.h"

namespace dp {

// ---- defaults: both through allgather (bootstrap traffic is tiny; simplicity wins) ----

std::string Bootstrap::broadcast(const std::string& blob, int root) {
  DP_CHECK(root >= 0 && root < size(), "bootstrap {}: broadcast root {} outside the world of {}", kind(), root, size());
  auto all = allgather(rank() == root ? blob : std::string());
  return std::move(all[static_cast<size_t>(root)]);
}

void Bootstrap::barrier() { allgather(std::string()); }

// ---- shared pieces ----

EnvLookup process_env() {
  return [](const std::string& name) -> const char* { return std::getenv(name.c_str()); };
}

Topology derive_topology(const std::vector<std::string>& hosts, int rank) {
  DP_CHECK(rank >= 0 && static_cast<size_t>(rank) < hosts.size(), "rank {} of {} host names", rank, hosts.size());
  std::map<std::string, int> node_of;
  for (const auto& h : hosts) node_of.emplace(h, static_cast<int>(node_of.size()));
  Topology t;
  const std::string& mine = hosts[static_cast<size_t>(rank)];
  t.node_id = node_of.at(mine);
  t.local_rank = 0;
  t.local_size = 0;
  for (size_t r = 0; r < hosts.size(); ++r) {
    if (hosts[r] != mine) continue;
    if (static_cast<int>(r) < rank) ++t.local_rank;
    ++t.local_size;
  }
  return t;
}

std::string host_key(const EnvLookup& env) {
  if (const char* n = env("SLURMD_NODENAME"); n && *n) return n;
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) == 0) return buf;
  return "unknown-host";
}

std::string format_ranks(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (i > 0) out += ", ";
    if (j - i >= 2) {
      out += fmt::format("{}-{}", ranks[i], ranks[j]);
    } else {
      for (size_t k = i; k <= j; ++k) out += fmt::format("{}{}", k > i ? ", " : "", ranks[k]);
    }
    i = j + 1;
  }
  return out;
}

std::string allgather_name(uint64_t seq) {
  return seq == 0 ? "allgather #0 (startup)" : fmt::format("allgather #{}", seq);
}

int env_int(const EnvLookup& env, const std::string& who, const std::string& name, int fallback, int lo, int hi) {
  const char* v = env(name);
  if (v == nullptr) return fallback;
  errno = 0;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*v == '\0' || *end != '\0' || errno != 0 || x < lo || x > hi)
    DP_THROW_USER("{}: {}='{}' is not an integer in [{}, {}]", who, name, v, lo, hi);
  return static_cast<int>(x);
}

void BootstrapBase::settle_topology(const std::string& host) {
  const Topology t = derive_topology(allgather(host), info_.rank);
  if (info_.local_rank < 0) info_.local_rank = t.local_rank;
  if (info_.local_size < 0) info_.local_size = t.local_size;
  if (info_.node_id < 0) info_.node_id = t.node_id;
  if (info_.local_rank >= info_.local_size)
    DP_THROW_USER("bootstrap {}: local rank {} is not below the local size {} (check LOCAL_RANK and LOCAL_WORLD_SIZE)",
                  kind(), info_.local_rank, info_.local_size);
}

// ---- single process ----

namespace {
class SingleBootstrap final : public Bootstrap {
 public:
  const char* kind() const override { return "single"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  int node_id() const override { return 0; }
  std::vector<std::string> allgather(const std::string& mine) override { return {mine}; }
};
}  // namespace

std::unique_ptr<Bootstrap> make_single_bootstrap() { return std::make_unique<SingleBootstrap>(); }

// ---- choosing one ----

namespace {
// "A is set but B, C are not" for a launcher's variable family.
void require_all(const EnvLookup& env, const std::vector<std::string>& family, const std::string& hint) {
  std::vector<std::string> have, missing;
  for (const auto& v : family) (env(v) ? have : missing).push_back(v);
  if (!have.empty() && !missing.empty())
    DP_THROW_USER("bootstrap auto: {} {} set but {} {}: {}", join(have), have.size() > 1 ? "are" : "is",
                  join(missing), missing.size() > 1 ? "are not" : "is not", hint);
}
}  // namespace

std::string detect_bootstrap(const EnvLookup& env) {
  if (env("PMIX_RANK")) return "pmix";
  if (env("PMI_FD") || env("PMI_RANK")) return "pmi2";
  if (env("RANK") || env("WORLD_SIZE")) {
    require_all(env, {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"},
                "a torchrun-style launcher sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (for a rendezvous "
                "through a shared directory instead, choose the bootstrap file:///shared/dir)");
    return "env";
  }
  if (env("SLURM_PROCID") || env("SLURM_NTASKS")) {
    require_all(env, {"SLURM_PROCID", "SLURM_NTASKS"}, "srun sets both for every task");
    // A batch script (or salloc's shell) has SLURM_PROCID too, but it is one process: only the
    // tasks of an srun step rendezvous.
    if (slurm_step_id(env)) return "slurm";
  }
  return "single";
}

std::unique_ptr<Bootstrap> make_bootstrap(const std::string& spec, double timeout_s, const EnvLookup& env) {
  DP_CHECK(timeout_s > 0, "bootstrap timeout {} s", timeout_s);
  std::string kind = spec == "auto" ? detect_bootstrap(env) : spec;
  std::unique_ptr<Bootstrap> b;
  if (kind == "single") b = make_single_bootstrap();
  else if (kind == "env") b = make_env_bootstrap(timeout_s, env);
  else if (kind == "slurm") b = make_slurm_bootstrap(timeout_s, env);
  else if (kind == "pmix") b = make_pmix_bootstrap(timeout_s);
  else if (kind == "pmi2") b = make_pmi2_bootstrap(timeout_s);
  else if (kind.rfind("file://", 0) == 0) b = make_file_bootstrap(kind.substr(7), timeout_s, env);
  else {
    const std::vector<std::string> known = {"auto", "pmix", "pmi2", "env", "slurm", "single"};
    const std::string near = closest_match(kind, known);
    DP_THROW_USER("unknown bootstrap '{}'{}; use one of {} or file:///shared/dir", kind,
                  near.empty() ? "" : " (did you mean '" + near + "'?)", join(known));
  }
  set_process_identity(b->rank(), b->size());
  log::refresh_prefix();
  if (b->rank() == 0)
    log::get("coll")->info("bootstrap {}: {} process{}, {} on this node", b->kind(), b->size(),
                           b->size() == 1 ? "" : "es", b->local_size());
  if (kind == "single" && spec == "auto" && env("SLURM_NTASKS") && !slurm_step_id(env) &&
      std::string(env("SLURM_NTASKS")) != "1")
    log::get("coll")->warn("bootstrap: this is a Slurm batch script with SLURM_NTASKS={} but no srun step: running "
                           "as one process (launch with srun for {} processes)",
                           env("SLURM_NTASKS"), env("SLURM_NTASKS"));
  return b;
}

std::unique_ptr<Bootstrap> make_bootstrap(const std::string& spec, double timeout_s) {
  return make_bootstrap(spec, timeout_s, process_env());
}

}  // namespace dp
