// defines: kSm90, the launch limits of the target (Hopper, compute capability 9.0), and
// launch_problem, the pure check of one launch's shape against them. DP_LAUNCH
// (kernels/cuda/kernel_launch.cuh) runs it before every launch in both builds, so a launch CUDA
// would refuse is refused the same way (cudaErrorInvalidConfiguration) by the emulator too.
//
// The numbers are the CUDA C Programming Guide's "Technical Specifications per Compute
// Capability" table, column 9.0.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace dp::kernels::cuda {

struct LaunchLimits {
  uint32_t max_threads_per_block;
  uint32_t max_block[3];  // blockDim.{x,y,z}
  uint32_t max_grid[3];   // gridDim.{x,y,z}
  size_t max_static_shared;          // bytes of __shared__ arrays per block (the compiler enforces it)
  size_t max_dynamic_shared_default;  // dynamic bytes without cudaFuncSetAttribute(MaxDynamicSharedMemorySize)
  size_t max_shared_optin;            // static + dynamic bytes per block after that opt-in
};

inline constexpr LaunchLimits kSm90{
    1024, {1024, 1024, 64}, {0x7FFFFFFFu, 65535, 65535}, 48 * 1024, 48 * 1024, 227 * 1024,
};

// Why this launch shape exceeds the limits ("" when it does not). dynamic_limit is the dynamic
// shared memory the kernel may use: lim.max_dynamic_shared_default unless it opted in to more.
inline std::string launch_problem(dim3 grid, dim3 block, size_t dynamic_shared, size_t dynamic_limit,
                                  const LaunchLimits& lim = kSm90) {
  const uint32_t g[3] = {grid.x, grid.y, grid.z}, b[3] = {block.x, block.y, block.z};
  const char* axis[3] = {"x", "y", "z"};
  for (int d = 0; d < 3; ++d) {
    if (g[d] == 0 || b[d] == 0)
      return std::string(g[d] == 0 ? "gridDim." : "blockDim.") + axis[d] + " is 0";
    if (b[d] > lim.max_block[d])
      return "blockDim." + std::string(axis[d]) + " = " + std::to_string(b[d]) + " exceeds " +
             std::to_string(lim.max_block[d]);
    if (g[d] > lim.max_grid[d])
      return "gridDim." + std::string(axis[d]) + " = " + std::to_string(g[d]) + " exceeds " +
             std::to_string(lim.max_grid[d]);
  }
  const uint64_t threads = uint64_t{b[0]} * b[1] * b[2];
  if (threads > lim.max_threads_per_block)
    return std::to_string(threads) + " threads per block exceed " + std::to_string(lim.max_threads_per_block);
  if (dynamic_shared > dynamic_limit || dynamic_shared > lim.max_shared_optin)
    return std::to_string(dynamic_shared) + " bytes of dynamic shared memory exceed " +
           std::to_string(dynamic_limit < lim.max_shared_optin ? dynamic_limit : lim.max_shared_optin) +
           " (above 48 KiB a kernel must opt in with cudaFuncSetAttribute(MaxDynamicSharedMemorySize), "
           "up to 227 KiB)";
  return "";
}

}  // namespace dp::kernels::cuda
