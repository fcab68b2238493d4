#include "kernels/cuda/emu/device.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstring>

#include "kernels/cuda/emu/errors.h"
#include "kernels/cuda/emu/memory.h"
#include "kernels/cuda/launch_limits.h"

namespace dp::emu {
namespace {

constexpr int kVersion = 12000;  // reported as CUDA 12.0, driver and runtime alike

cudaError_t check_device(int device, const char* call) {
  if (device == 0) return cudaSuccess;
  return api_error(cudaErrorInvalidDevice, call, fmt::format("device {}: the emulator has one device, 0", device));
}

int& current_device() {
  thread_local int d = 0;
  return d;
}

}  // namespace
}  // namespace dp::emu

using dp::emu::api_error;
using dp::emu::check_device;

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return api_error(cudaErrorInvalidValue, "cudaGetDeviceCount", "null result pointer");
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (const cudaError_t e = check_device(device, "cudaSetDevice"); e != cudaSuccess) return e;
  dp::emu::current_device() = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return api_error(cudaErrorInvalidValue, "cudaGetDevice", "null result pointer");
  *device = dp::emu::current_device();
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (prop == nullptr) return api_error(cudaErrorInvalidValue, "cudaGetDeviceProperties", "null result pointer");
  if (const cudaError_t e = check_device(device, "cudaGetDeviceProperties"); e != cudaSuccess) return e;
  const auto& lim = dp::kernels::cuda::kSm90;
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "dptrain CUDA emulator (sm_90 limits)");
  std::memcpy(prop->uuid.bytes, "dptrain-emulator", 16);
  prop->totalGlobalMem = dp::emu::kDeviceCapacity;
  prop->sharedMemPerBlock = lim.max_static_shared;
  prop->sharedMemPerBlockOptin = lim.max_shared_optin;
  prop->sharedMemPerMultiprocessor = 228 * 1024;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = static_cast<int>(lim.max_threads_per_block);
  for (int d = 0; d < 3; ++d) {
    prop->maxThreadsDim[d] = static_cast<int>(lim.max_block[d]);
    prop->maxGridSize[d] = static_cast<int>(lim.max_grid[d]);
  }
  prop->multiProcessorCount = 132;
  prop->major = 9;
  prop->minor = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (value == nullptr) return api_error(cudaErrorInvalidValue, "cudaDeviceGetAttribute", "null result pointer");
  cudaDeviceProp p;
  if (const cudaError_t e = cudaGetDeviceProperties(&p, device); e != cudaSuccess) return e;
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; return cudaSuccess;
    case cudaDevAttrMaxBlockDimX: *value = p.maxThreadsDim[0]; return cudaSuccess;
    case cudaDevAttrMaxBlockDimY: *value = p.maxThreadsDim[1]; return cudaSuccess;
    case cudaDevAttrMaxBlockDimZ: *value = p.maxThreadsDim[2]; return cudaSuccess;
    case cudaDevAttrMaxGridDimX: *value = p.maxGridSize[0]; return cudaSuccess;
    case cudaDevAttrMaxGridDimY: *value = p.maxGridSize[1]; return cudaSuccess;
    case cudaDevAttrMaxGridDimZ: *value = p.maxGridSize[2]; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = static_cast<int>(p.sharedMemPerBlock); return cudaSuccess;
    case cudaDevAttrWarpSize: *value = p.warpSize; return cudaSuccess;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = static_cast<int>(p.sharedMemPerBlockOptin); return cudaSuccess;
  }
  return api_error(cudaErrorInvalidValue, "cudaDeviceGetAttribute",
                   fmt::format("attribute {} is not emulated", static_cast<int>(attr)));
}

cudaError_t cudaDeviceGetPCIBusId(char* bus_id, int len, int device) {
  if (bus_id == nullptr || len <= 0) return api_error(cudaErrorInvalidValue, "cudaDeviceGetPCIBusId", "no buffer");
  if (const cudaError_t e = check_device(device, "cudaDeviceGetPCIBusId"); e != cudaSuccess) return e;
  std::snprintf(bus_id, static_cast<size_t>(len), "0000:00:00.0");
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
  if (version == nullptr) return api_error(cudaErrorInvalidValue, "cudaDriverGetVersion", "null result pointer");
  *version = dp::emu::kVersion;
  return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int* version) {
  if (version == nullptr) return api_error(cudaErrorInvalidValue, "cudaRuntimeGetVersion", "null result pointer");
  *version = dp::emu::kVersion;
  return cudaSuccess;
}
