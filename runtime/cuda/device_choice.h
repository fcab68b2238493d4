// defines: DeviceRequest, DeviceChoice, parse_device_request, choose_local_device — which device
// a process trains on, as a pure function of what was asked (train.device), where the process
// sits on its node (local rank and size), how many GPUs it sees and the collective backend.
// No CUDA call here, so the decision is tested without a GPU (tests/runtime/cuda/).
#pragma once
#include <span>
#include <string>
#include <string_view>

#include "runtime/collective_backend.h"
#include "runtime/enum_names.h"
#include "runtime/tensor.h"

namespace dp::cuda {

enum class DeviceRequest { Auto, Cpu, Cuda };

inline constexpr EnumName<DeviceRequest> kDeviceRequestNames[] = {
    {DeviceRequest::Auto, "auto"}, {DeviceRequest::Cpu, "cpu"}, {DeviceRequest::Cuda, "cuda"}};
constexpr std::span<const EnumName<DeviceRequest>> enum_names(DeviceRequest) { return kDeviceRequestNames; }

// "auto" | "cpu" | "cuda" named outside the config; UserError naming the choices otherwise. The
// config schema parses train.device itself.
DeviceRequest parse_device_request(std::string_view s);

struct DeviceChoice {
  Device device;     // cpu, or cuda(local_rank % device_count)
  std::string note;  // one log line for the caller to print ("" when nothing is worth saying)
};

// Rules:
//   cpu                              -> the CPU.
//   no GPU (device_count == 0)       -> auto: the CPU (note says so); cuda: UserError.
//   GPUs                             -> GPU local_rank % device_count.
//   more local ranks than GPUs       -> still local_rank % device_count, with a note: each rank
//                                       may see GPUs of its own (per-task CUDA_VISIBLE_DEVICES),
//                                       which only the GPUs' UUIDs tell; the nccl backend compares
//                                       them across ranks before NCCL starts (two ranks on one GPU
//                                       is its UserError), the ring backend lets ranks share.
// local_rank in [0, local_size) and device_count >= 0 are the bootstrap's invariants (DpError).
DeviceChoice choose_local_device(DeviceRequest want, int local_rank, int local_size, int device_count,
                                 CollectiveBackend backend);

}  // namespace dp::cuda
