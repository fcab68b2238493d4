// defines: make_env_bootstrap (torchrun's variables) and make_store_bootstrap, the TCP-store
// rendezvous it shares with the Slurm bootstrap.
#pragma once
#include <memory>
#include <string>

#include "collectives/bootstrap/common.h"

namespace dp {

// Where the TCP store is and how it is guarded: MASTER_ADDR:MASTER_PORT (addr, port), what decides
// the address rank 0 binds (bind: DPTRAIN_STORE_BIND when set, e.g. "0.0.0.0" behind NAT; iface:
// dist.iface; else addr itself, never every interface: collectives/listen_address.h) and the job
// token (DPTRAIN_JOB_TOKEN, "" when unset).
struct StoreAddress {
  std::string addr, bind, iface, token;
  int port = 0;
};
StoreAddress store_address(const EnvLookup& env, std::string addr, int port, std::string iface = "");

// A TCP store bootstrap (env and slurm kinds): rank 0 serves the store on at.port, every rank
// (rank 0 included) is a client, and with a token every connection proves it
// (collectives/bootstrap/tcp_store.h). Without a token on a non-loopback address rank 0 warns
// that the store is open to anyone who can reach it.
// allgather #s: every rank sets key "<s>/<rank>" and waits for all "<s>/<r>"; rank 0 deletes
// round s-1's keys in round s (everyone has read them by then: each rank asks for round s only
// after its round s-1 answer), so the store holds at most two rounds. A rank waits in slices of
// report_s seconds (rendezvous_report_s), logging after each which ranks it still waits for.
std::unique_ptr<Bootstrap> make_store_bootstrap(const std::string& kind, const LaunchInfo& info, const StoreAddress& at,
                                                double timeout_s, const std::string& host, double report_s = 5);

// torchrun's convention: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (required); LOCAL_RANK,
// LOCAL_WORLD_SIZE, GROUP_RANK (node id) optional, derived from host names when absent.
// iface: dist.iface ("" = unset), the interface whose address rank 0's store binds.
std::unique_ptr<Bootstrap> make_env_bootstrap(double timeout_s, const EnvLookup& env, const std::string& iface = "");

}  // namespace dp
