#include "kernels/cuda/emu/launch.h"

#include <fmt/format.h>

#include <map>
#include <mutex>

#include "kernels/cuda/emu/errors.h"
#include "kernels/cuda/emu/streams.h"
#include "kernels/cuda/launch_limits.h"

namespace dp::emu {
namespace {

struct FuncAttributes {
  std::mutex mu;
  std::map<const void*, size_t> dynamic_limit;
};

FuncAttributes& attributes() {
  static FuncAttributes a;
  return a;
}

}  // namespace

void run_grid(const LaunchInfo& info, cudaStream_t stream, BlockRunner::Body body, void* arg) {
  if (check_stream(stream, "kernel launch") != cudaSuccess) return;
  BlockRunner runner(info, body, arg);
  for (unsigned z = 0; z < info.grid.z; ++z)
    for (unsigned y = 0; y < info.grid.y; ++y)
      for (unsigned x = 0; x < info.grid.x; ++x)
        if (!runner.run(uint3{x, y, z})) return;
}

size_t dynamic_shared_limit(const void* kernel) {
  auto& a = attributes();
  std::lock_guard lock(a.mu);
  const auto it = a.dynamic_limit.find(kernel);
  return it == a.dynamic_limit.end() ? dp::kernels::cuda::kSm90.max_dynamic_shared_default : it->second;
}

cudaError_t set_dynamic_shared_limit(const void* kernel, int bytes) {
  const size_t optin = dp::kernels::cuda::kSm90.max_shared_optin;
  if (kernel == nullptr || bytes < 0 || static_cast<size_t>(bytes) > optin)
    return api_error(cudaErrorInvalidValue, "cudaFuncSetAttribute",
                     fmt::format("MaxDynamicSharedMemorySize {} is outside [0, {}]", bytes, optin));
  auto& a = attributes();
  std::lock_guard lock(a.mu);
  a.dynamic_limit[kernel] = static_cast<size_t>(bytes);
  return cudaSuccess;
}

}  // namespace dp::emu

cudaError_t cudaFuncSetAttribute(const void* kernel, cudaFuncAttribute attr, int value) {
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) return dp::emu::set_dynamic_shared_limit(kernel, value);
  if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) return cudaSuccess;  // a hint; nothing to emulate
  return dp::emu::api_error(cudaErrorInvalidValue, "cudaFuncSetAttribute",
                            fmt::format("attribute {} is not emulated", static_cast<int>(attr)));
}
