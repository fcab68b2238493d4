#include "collectives/make_communicator.h"

#include "collectives/ring/ring_communicator.h"
#include "runtime/device_memory.h"
#include "base/error.h"

#ifdef DPTRAIN_HAVE_CUDA
#include "collectives/nccl/nccl_communicator.h"
#endif

namespace dp {

const char* communicator_backends() { return "ring, nccl"; }

std::unique_ptr<Communicator> make_communicator(const std::string& backend, Bootstrap& boot, double timeout_s) {
  if (backend == "nccl") {
#ifndef DPTRAIN_HAVE_CUDA
    DP_THROW_USER("backend \"nccl\": this dptrain was built without CUDA (and so without NCCL) [{}]; rebuild on a "
                  "machine with the CUDA toolkit, or use backend \"ring\"",
                  identity_string());
#else
    if (cuda_device_count() == 0)
      DP_THROW_USER("backend \"nccl\" needs a GPU and this process sees none [{}] (no GPU, no driver, or "
                    "CUDA_VISIBLE_DEVICES hides them all); use backend \"ring\"",
                    identity_string());
    if (boot.size() == 1) return std::make_unique<SingleProcessCommunicator>();
    return make_nccl_communicator(boot, timeout_s);
#endif
  }
  if (backend == "ring") {
    if (boot.size() == 1) return std::make_unique<SingleProcessCommunicator>();
    return make_ring_communicator(boot, timeout_s);
  }
  DP_THROW_USER("unknown collectives backend \"{}\" (known: {})", backend, communicator_backends());
}

}  // namespace dp
