// dptrain_probe: one line per rank saying what the launcher and the bootstrap made of this process,
// and the result of one allreduce over the ring backend. Used by the Slurm integration test
// (tests/integration/test_slurm_probe.sh) under srun --mpi=pmix / --mpi=pmi2 / plain srun and
// with the torchrun-style env variables.
//
//   dptrain_probe [--bootstrap SPEC] [--timeout S]
//
// SPEC as dist.bootstrap ("auto" by default: PMIx -> PMI2 -> env -> Slurm env -> single).
// Prints, on stdout, as a single write:
//   probe kind=<pmix|pmi2|slurm|env|...> rank=R size=N local_rank=L local_size=M node=K allreduce=S
// where S is the f64 sum over ranks of (rank + 1), i.e. N(N+1)/2. Exit status 0 on success, 1 on
// any error (message on stderr), 2 on a usage error.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "collectives/bootstrap/factory.h"
#include "collectives/communicator.h"
#include "collectives/ring/ring_communicator.h"
#include "runtime/tensor.h"

int main(int argc, char** argv) {
  std::string spec = "auto";
  double timeout_s = 60;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--bootstrap" && i + 1 < argc) {
      spec = argv[++i];
    } else if (a == "--timeout" && i + 1 < argc) {
      timeout_s = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: dptrain_probe [--bootstrap SPEC] [--timeout S]\n");
      return 2;
    }
  }
  try {
    auto bs = dp::make_bootstrap(spec, timeout_s);
    auto comm = dp::make_ring_communicator(*bs, timeout_s);
    dp::Tensor t = dp::Tensor::zeros({1}, dp::DType::F64);
    t.data<double>()[0] = bs->rank() + 1.0;
    comm->allreduce(t, dp::ReduceOp::Sum);
    comm->barrier();
    char line[256];
    std::snprintf(line, sizeof line,
                  "probe kind=%s rank=%d size=%d local_rank=%d local_size=%d node=%d allreduce=%.17g\n",
                  bs->kind(), bs->rank(), bs->size(), bs->local_rank(), bs->local_size(), bs->node_id(),
                  t.data<double>()[0]);
    std::fputs(line, stdout);
    std::fflush(stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dptrain_probe: error: %s\n", e.what());
    return 1;
  }
}
