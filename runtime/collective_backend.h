// defines: CollectiveBackend (dist.backend, collbench --backend) and its name table. The enum
// sits below collectives/ because the config schema and the device choice
// (runtime/cuda/device_choice.h) need it too; collectives/make_communicator.h turns it into a
// Communicator.
#pragma once
#include <span>

#include "runtime/enum_names.h"

namespace dp {

// Ring: our own collectives (collectives/ring/), host tensors. Nccl: NCCL, one GPU per rank.
enum class CollectiveBackend { Ring, Nccl };

inline constexpr EnumName<CollectiveBackend> kCollectiveBackendNames[] = {{CollectiveBackend::Ring, "ring"},
                                                                          {CollectiveBackend::Nccl, "nccl"}};
constexpr std::span<const EnumName<CollectiveBackend>> enum_names(CollectiveBackend) {
  return kCollectiveBackendNames;
}

}  // namespace dp
