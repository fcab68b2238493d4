// dptrain_probe: one line per rank saying what the launcher and the bootstrap made of this process,
// and the result of one allreduce over the ring backend. Used by the Slurm integration test
// (tests/integration/test_slurm_probe.sh) under srun --mpi=pmix / --mpi=pmi2 / plain srun and
// with the torchrun-style env variables.
//
//   dptrain_probe [--bootstrap SPEC] [--timeout S] [--links] [--iface IF]
//
// SPEC as dist.bootstrap ("auto" by default: PMIx -> PMI2 -> env -> Slurm env -> single); IF as
// dist.iface (the store and the ring listen on its address).
// Prints, on stdout, as a single write:
//   probe kind=<pmix|pmi2|slurm|env|...> rank=R size=N local_rank=L local_size=M node=K allreduce=S
// where S is the f64 sum over ranks of (rank + 1), i.e. N(N+1)/2; with --links the line goes on
//   ... host=H addr=A shm=P
// H: this process's host name (gethostname), A: the address the ring listens on, P: the ranks it
// reaches over shared memory ("1,3"; "-" for none). The multi-host test (tests/integration/
// test_hosts_fmnist.sh) checks them. Exit status 0 on success, 1 on any error (message on
// stderr), 2 on a usage error.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "collectives/bootstrap/factory.h"
#include "collectives/communicator.h"
#include "collectives/ring/mesh.h"
#include "collectives/ring/ring_communicator.h"
#include "runtime/suggest.h"
#include "runtime/tensor.h"

int main(int argc, char** argv) {
  std::string spec = "auto";
  double timeout_s = 60;
  bool links = false;
  std::string iface;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--bootstrap" && i + 1 < argc) {
      spec = argv[++i];
    } else if (a == "--timeout" && i + 1 < argc) {
      timeout_s = std::atof(argv[++i]);
    } else if (a == "--links") {
      links = true;
    } else if (a == "--iface" && i + 1 < argc) {
      iface = argv[++i];
    } else {
      std::fprintf(stderr, "usage: dptrain_probe [--bootstrap SPEC] [--timeout S] [--links] [--iface IF]\n");
      return 2;
    }
  }
  try {
    auto bs = dp::make_bootstrap(spec, timeout_s, iface);
    dp::RingOptions options = dp::ring_options_from_env(timeout_s);
    options.iface = iface;
    auto comm = dp::make_ring_communicator(*bs, options);
    dp::Tensor t = dp::Tensor::zeros({1}, dp::DType::F64);
    t.data<double>()[0] = bs->rank() + 1.0;
    comm->allreduce(t, dp::ReduceOp::Sum);
    comm->barrier();
    std::string line = fmt::format("probe kind={} rank={} size={} local_rank={} local_size={} node={} allreduce={}",
                                   bs->kind(), bs->rank(), bs->size(), bs->local_rank(), bs->local_size(),
                                   bs->node_id(), t.data<double>()[0]);
    if (links) {
      char host[256] = {0};
      gethostname(host, sizeof host - 1);
      std::vector<std::string> peers;
      for (int p : comm->shared_memory_peers()) peers.push_back(std::to_string(p));
      const std::string shm = dp::join(peers, ",");
      line += fmt::format(" host={} addr={} shm={}", host, dp::ring::ring_listen_host(*bs, iface), shm.empty() ? "-" : shm);
    }
    line += "\n";
    std::fputs(line.c_str(), stdout);
    std::fflush(stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dptrain_probe: error: %s\n", e.what());
    return 1;
  }
}
