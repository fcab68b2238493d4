// defines: the bootstrap implementations behind make_bootstrap (single, env/TCP store, Slurm env,
// shared file) and the small pieces they share: the launcher's view of this process (LaunchInfo),
// topology derived from host names, rank-list formatting, environment parsing.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collectives/bootstrap.h"

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

 protected:
  explicit BootstrapBase(const LaunchInfo& info) : info_(info) {}
  // Call at the end of the derived constructor: allgather #0 of the host key, then derivation.
  void settle_topology(const std::string& host);
  LaunchInfo info_;
};

// rank 0 of 1; allgather returns {mine}.
std::unique_ptr<Bootstrap> make_single_bootstrap();

// A TCP store bootstrap (env and slurm kinds): rank 0 serves the store on master_port, every rank
// (rank 0 included) is a client. The store listens on the master address itself when that is a
// loopback literal (127.x.x.x, ::1, localhost), on every interface otherwise (as torchrun does:
// a host name may resolve to 127.0.1.1 on its own host and to its real address elsewhere).
// allgather #s: every rank sets key "<s>/<rank>" and waits for all "<s>/<r>"; rank 0 deletes
// round s-1's keys in round s (everyone has read them by then: each rank asks for round s only
// after its round s-1 answer), so the store holds at most two rounds.
std::unique_ptr<Bootstrap> make_store_bootstrap(const std::string& kind, const LaunchInfo& info,
                                                const std::string& master_addr, int master_port, double timeout_s,
                                                const std::string& host);

// torchrun's convention: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (required); LOCAL_RANK,
// LOCAL_WORLD_SIZE, GROUP_RANK (node id) optional, derived from host names when absent.
std::unique_ptr<Bootstrap> make_env_bootstrap(double timeout_s, const EnvLookup& env);

// Rendezvous through a directory every rank can see (file:///shared/dir): see bootstrap_file.cpp.
std::unique_ptr<Bootstrap> make_file_bootstrap(const std::string& dir, double timeout_s, const EnvLookup& env);

// srun without PMI: SLURM_PROCID, SLURM_NTASKS (required), SLURM_LOCALID, SLURM_NODEID, local
// size from SLURM_STEP_TASKS_PER_NODE (else SLURM_TASKS_PER_NODE); the store of
// make_store_bootstrap on the first host of SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST), port
// slurm_store_port(SLURM_JOB_ID, SLURM_STEP_ID). MASTER_ADDR / MASTER_PORT override both.
std::unique_ptr<Bootstrap> make_slurm_bootstrap(double timeout_s, const EnvLookup& env);

// The Slurm bootstrap's port, in the dynamic range 49152-65535 that no service registers:
//   49152 + (job_id * 16 + step_id % 16) % 16384
// Concurrent steps of one job (up to 16) get different ports; jobs collide only when their ids
// are 1024 apart and they share rank 0's node at the same time (then set MASTER_PORT).
constexpr int kSlurmPortBase = 49152, kSlurmPortCount = 16384;
int slurm_store_port(uint64_t job_id, uint64_t step_id);
// The srun step number (SLURM_STEP_ID, else SLURM_STEPID); none in a batch script, an extern or
// an interactive step (absent, or one of Slurm's special ids from 0xfffffff0 up).
std::optional<uint64_t> slurm_step_id(const EnvLookup& env);

// PMIx and PMI2, loaded at run time (dlopen), so the binary runs where they are absent
// (DPTRAIN_PMIX_LIB / DPTRAIN_PMI2_LIB name the library file when it is elsewhere).
std::unique_ptr<Bootstrap> make_pmix_bootstrap(double timeout_s);
std::unique_ptr<Bootstrap> make_pmi2_bootstrap(double timeout_s);
// PMI2 values are short strings: blobs travel as base64url without padding (RFC 4648 s. 5).
std::string base64url_encode(const std::string& bytes);
std::optional<std::string> base64url_decode(const std::string& text);  // nullopt when malformed

// Which implementation "auto" picks here (pure): "pmix" when PMIX_RANK is set, "pmi2" when
// PMI_FD or PMI_RANK is, "env" when RANK and WORLD_SIZE are (MASTER_ADDR and MASTER_PORT then
// required), "slurm" inside an srun step (SLURM_PROCID, SLURM_NTASKS and a step id), else
// "single" (a Slurm batch script without srun included). UserError naming the missing variables
// when a launcher left only part of its rank information (RANK without WORLD_SIZE, ...).
std::string detect_bootstrap(const EnvLookup& env);

// make_bootstrap with an explicit environment; sets the process identity (error and log prefixes).
std::unique_ptr<Bootstrap> make_bootstrap(const std::string& spec, double timeout_s, const EnvLookup& env);

}  // namespace dp
