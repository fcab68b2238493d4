// defines: make_env_bootstrap (torchrun's variables) and make_store_bootstrap, the TCP-store
// rendezvous it shares with the Slurm bootstrap.
#pragma once
#include <memory>
#include <string>

#include "collectives/bootstrap/common.h"

namespace dp {

// A TCP store bootstrap (env and slurm kinds): rank 0 serves the store on master_port, every rank
// (rank 0 included) is a client. The store listens on the master address itself when that is a
// loopback literal (127.x.x.x, ::1, localhost), on every interface otherwise (as torchrun does:
// a host name may resolve to 127.0.1.1 on its own host and to its real address elsewhere).
// allgather #s: every rank sets key "<s>/<rank>" and waits for all "<s>/<r>"; rank 0 deletes
// round s-1's keys in round s (everyone has read them by then: each rank asks for round s only
// after its round s-1 answer), so the store holds at most two rounds. A rank waits in slices of
// report_s seconds (rendezvous_report_s), logging after each which ranks it still waits for.
std::unique_ptr<Bootstrap> make_store_bootstrap(const std::string& kind, const LaunchInfo& info,
                                                const std::string& master_addr, int master_port, double timeout_s,
                                                const std::string& host, double report_s = 5);

// torchrun's convention: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (required); LOCAL_RANK,
// LOCAL_WORLD_SIZE, GROUP_RANK (node id) optional, derived from host names when absent.
std::unique_ptr<Bootstrap> make_env_bootstrap(double timeout_s, const EnvLookup& env);

}  // namespace dp
