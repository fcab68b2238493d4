// defines: GpuIdentity (which physical GPU a rank drives, and on which host) and the pure checks
// the nccl backend runs on every rank's identity, gathered through the Bootstrap, before it calls
// NCCL: NCCL needs one GPU per rank, and two ranks on one GPU otherwise hang or fail deep inside
// ncclCommInitRank with an unhelpful "invalid usage".
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace dp::nccl {

struct GpuIdentity {
  std::string host;        // gethostname()
  int device = -1;         // the CUDA ordinal this rank uses (after CUDA_VISIBLE_DEVICES)
  int visible = 0;         // CUDA devices this rank can see
  std::string uuid;        // "GPU-8c6e..." (cudaDeviceProp::uuid); the key
  std::string pci_bus_id;  // "0000:3b:00.0"
};

// One line, tab-separated, for Bootstrap::allgather; parse_gpu_identity reverses it (nullopt on
// a malformed blob).
std::string encode_gpu_identity(const GpuIdentity& g);
std::optional<GpuIdentity> parse_gpu_identity(const std::string& blob);

// "" when every rank drives a GPU of its own; otherwise the error, the same on every rank:
//  - ranks that see no GPU: "nccl backend: rank 1 on host node1 sees no CUDA device (no GPU, no
//    driver, or CUDA_VISIBLE_DEVICES hides them all); use dist.backend = \"ring\" without GPUs"
//  - the first GPU that two or more ranks share (same host and UUID):
//    "nccl backend: ranks 0 and 1 on host node1 both use GPU 0 (GPU-8c6e..., PCI 0000:3b:00.0);
//     NCCL needs one GPU per rank: start at most 1 rank per node there (it shows 1 GPU), or give
//     each rank its own GPU with CUDA_VISIBLE_DEVICES"
std::string gpu_assignment_error(const std::vector<GpuIdentity>& ranks);

}  // namespace dp::nccl
