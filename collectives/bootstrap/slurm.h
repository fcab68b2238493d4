// defines: make_slurm_bootstrap (srun without PMI), the Slurm store port and step id.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "collectives/bootstrap/common.h"

namespace dp {

// srun without PMI: SLURM_PROCID, SLURM_NTASKS (required), SLURM_LOCALID, SLURM_NODEID, local
// size from SLURM_STEP_TASKS_PER_NODE (else SLURM_TASKS_PER_NODE); the store of
// make_store_bootstrap on the first host of SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST), port
// slurm_store_port(SLURM_JOB_ID, SLURM_STEP_ID). MASTER_ADDR / MASTER_PORT override both.
// iface: dist.iface ("" = unset), the interface whose address rank 0's store binds.
std::unique_ptr<Bootstrap> make_slurm_bootstrap(double timeout_s, const EnvLookup& env, const std::string& iface = "");

// The Slurm bootstrap's port, in the dynamic range 49152-65535 that no service registers:
//   49152 + (job_id * 16 + step_id % 16) % 16384
// Concurrent steps of one job (up to 16) get different ports; jobs collide only when their ids
// are 1024 apart and they share rank 0's node at the same time (then set MASTER_PORT).
constexpr int kSlurmPortBase = 49152, kSlurmPortCount = 16384;
int slurm_store_port(uint64_t job_id, uint64_t step_id);
// The srun step number (SLURM_STEP_ID, else SLURM_STEPID); none in a batch script, an extern or
// an interactive step (absent, or one of Slurm's special ids from 0xfffffff0 up).
std::optional<uint64_t> slurm_step_id(const EnvLookup& env);

}  // namespace dp
