#include "runtime/cuda/device_choice.h"

namespace dp::cuda {

DeviceRequest parse_device_request(std::string_view s) {
  if (const auto r = enum_from_name<DeviceRequest>(s)) return *r;
  DP_THROW_USER("train.device = \"{}\" is not a device; use \"auto\", \"cpu\" or \"cuda\"", s);
}

DeviceChoice choose_local_device(DeviceRequest want, int local_rank, int local_size, int device_count,
                                 CollectiveBackend backend) {
  DP_CHECK(local_size >= 1 && local_rank >= 0 && local_rank < local_size, "local rank {} of local size {}",
           local_rank, local_size);
  DP_CHECK(device_count >= 0, "device count {}", device_count);
  if (want == DeviceRequest::Cpu) return {Device::cpu(), ""};
  if (device_count == 0) {
    if (want == DeviceRequest::Cuda)
      DP_THROW_USER("train.device = \"cuda\" but no usable GPU was found (no driver, no device, or a build without "
                    "CUDA); use train.device = \"auto\" or \"cpu\"");
    return {Device::cpu(), "no GPU found; training on the CPU"};
  }
  const int gpu = local_rank % device_count;
  if (local_size <= device_count) return {Device::cuda(gpu), ""};
  // Fewer visible GPUs than local ranks: either each rank sees its own (Slurm's --gpus-per-task
  // or a per-rank CUDA_VISIBLE_DEVICES) or ranks really share. Only the physical GPU ids tell,
  // so the backend that cannot share (nccl) checks them across ranks before it starts
  // (collectives/nccl/gpu_assignment.h); the ring backend shares GPUs fine.
  if (backend == CollectiveBackend::Nccl)
    return {Device::cuda(gpu), fmt::format("{} processes on this node, {} visible GPU(s) each; local rank {} uses GPU "
                                           "{} (the nccl backend checks that no two ranks drive one GPU)",
                                           local_size, device_count, local_rank, gpu)};
  return {Device::cuda(gpu), fmt::format("{} processes on this node share {} GPU(s); local rank {} uses GPU {}",
                                         local_size, device_count, local_rank, gpu)};
}

}  // namespace dp::cuda
