#include "collectives/bootstrap/factory.h"

#include "base/error.h"
#include "collectives/bootstrap/env.h"
#include "collectives/bootstrap/file.h"
#include "collectives/bootstrap/pmi2.h"
#include "collectives/bootstrap/pmix.h"
#include "collectives/bootstrap/single.h"
#include "collectives/bootstrap/slurm.h"
#include "runtime/log.h"
#include "runtime/suggest.h"

namespace dp {

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

std::unique_ptr<Bootstrap> make_bootstrap(const std::string& spec, double timeout_s, const EnvLookup& env,
                                          const std::string& iface) {
  DP_CHECK(timeout_s > 0, "bootstrap timeout {} s", timeout_s);
  std::string kind = spec == "auto" ? detect_bootstrap(env) : spec;
  std::unique_ptr<Bootstrap> b;
  if (kind == "single") b = make_single_bootstrap();
  else if (kind == "env") b = make_env_bootstrap(timeout_s, env, iface);
  else if (kind == "slurm") b = make_slurm_bootstrap(timeout_s, env, iface);
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

std::unique_ptr<Bootstrap> make_bootstrap(const std::string& spec, double timeout_s, const std::string& iface) {
  return make_bootstrap(spec, timeout_s, process_env(), iface);
}

}  // namespace dp
