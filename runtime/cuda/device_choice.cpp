#include "runtime/cuda/device_choice.h"

namespace dp::cuda {

DeviceRequest parse_device_request(std::string_view s) {
  if (s == "auto") return DeviceRequest::Auto;
  if (s == "cpu") return DeviceRequest::Cpu;
  if (s == "cuda") return DeviceRequest::Cuda;
  DP_THROW_USER("train.device = \"{}\" is not a device; use \"auto\", \"cpu\" or \"cuda\"", s);
}

DeviceChoice choose_local_device(DeviceRequest want, int local_rank, int local_size, int device_count,
                                 std::string_view backend) {
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
  // NCCL refuses two ranks of one communicator on one GPU; the ring backend stages through host
  // memory and does not care, so sharing is allowed there (slower, but useful for tests).
  if (backend == "nccl")
    DP_THROW_USER("{} processes on this node but only {} visible GPU(s), and dist.backend = \"nccl\" needs one GPU "
                  "per process; start at most {} processes per node (--nproc {} or --ntasks-per-node={}), make more "
                  "GPUs visible (CUDA_VISIBLE_DEVICES), or use dist.backend = \"ring\"",
                  local_size, device_count, device_count, device_count, device_count);
  return {Device::cuda(gpu), fmt::format("{} processes on this node share {} GPU(s); local rank {} uses GPU {}",
                                         local_size, device_count, local_rank, gpu)};
}

}  // namespace dp::cuda
