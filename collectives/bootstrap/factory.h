// defines: make_bootstrap, which picks the implementation (auto order: PMIx -> PMI2 -> env
// (torchrun) -> Slurm env (an srun step) -> single; only "file:///dir" selects the file
// rendezvous), and detect_bootstrap, the pure rule behind "auto".
#pragma once
#include <memory>
#include <string>

#include "collectives/bootstrap/bootstrap.h"
#include "collectives/bootstrap/common.h"

namespace dp {

// spec: "auto", "pmix", "pmi2", "env", "slurm", "single", or "file:///shared/dir".
// timeout_s bounds every wait for peers. Sets the process identity (rank r/N in every error and
// log prefix). UserError for an unknown spec or a launcher's partial rank information.
// iface: dist.iface ("" = unset), the network interface whose address the TCP store (env and
// slurm kinds) binds (collectives/listen_address.h); the ring's listeners get it from
// make_communicator.
std::unique_ptr<Bootstrap> make_bootstrap(const std::string& spec, double timeout_s, const std::string& iface = "");

// Which implementation "auto" picks here (pure): "pmix" when PMIX_RANK is set, "pmi2" when
// PMI_FD or PMI_RANK is, "env" when RANK and WORLD_SIZE are (MASTER_ADDR and MASTER_PORT then
// required), "slurm" inside an srun step (SLURM_PROCID, SLURM_NTASKS and a step id), else
// "single" (a Slurm batch script without srun included). UserError naming the missing variables
// when a launcher left only part of its rank information (RANK without WORLD_SIZE, ...).
std::string detect_bootstrap(const EnvLookup& env);

// make_bootstrap with an explicit environment; sets the process identity (error and log prefixes).
std::unique_ptr<Bootstrap> make_bootstrap(const std::string& spec, double timeout_s, const EnvLookup& env,
                                          const std::string& iface = "");

}  // namespace dp
