// defines: CUDA's language layer for the emulation build — the execution-space qualifiers
// (__global__, __device__, __host__, __forceinline__, ... as nothing or inline), the built-in
// variables threadIdx, blockIdx, blockDim, gridDim and warpSize, the block barrier
// __syncthreads (and its _count/_and/_or forms), memory fences and __trap.
//
// __CUDACC__ is not defined: the sources are host C++ and headers that test it (fmt, the
// toolkit's) must take their host paths. __CUDA_ARCH__ is 900, so device-only branches (the _rn
// intrinsics in kernels/cuda/host_device.h) are the ones compiled and run — the emulator tests
// the code the GPU runs. A plain `__shared__` is a compile error: shared arrays need per-block
// storage and are declared with DP_SHARED (kernels/cuda/shared_memory.cuh).
#pragma once
#include <source_location>

#include "kernels/cuda/emu/block.h"

#ifndef __CUDA_ARCH__
#define __CUDA_ARCH__ 900
#endif

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __constant__
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __shared__ \
  static_assert(false, "declare shared memory with DP_SHARED (kernels/cuda/shared_memory.cuh) in the emulation build");

// Read-only views of the running thread's coordinates (they are set by the block scheduler).
#define threadIdx (static_cast<const uint3&>(::dp::emu::t_coords.thread_idx))
#define blockIdx (static_cast<const uint3&>(::dp::emu::t_coords.block_idx))
#define blockDim (static_cast<const dim3&>(::dp::emu::t_coords.block_dim))
#define gridDim (static_cast<const dim3&>(::dp::emu::t_coords.grid_dim))
inline constexpr int warpSize = 32;

inline void __syncthreads(std::source_location site = std::source_location::current()) {
  dp::emu::running_block("__syncthreads").barrier(dp::emu::BarrierKind::Plain, 0, site);
}
inline int __syncthreads_count(int pred, std::source_location site = std::source_location::current()) {
  return dp::emu::running_block("__syncthreads_count").barrier(dp::emu::BarrierKind::Count, pred, site);
}
inline int __syncthreads_and(int pred, std::source_location site = std::source_location::current()) {
  return dp::emu::running_block("__syncthreads_and").barrier(dp::emu::BarrierKind::And, pred, site);
}
inline int __syncthreads_or(int pred, std::source_location site = std::source_location::current()) {
  return dp::emu::running_block("__syncthreads_or").barrier(dp::emu::BarrierKind::Or, pred, site);
}

// One host thread runs the whole grid, one CUDA thread at a time: every write is visible to every
// later read, so fences have nothing to do (see README.md: what only a GPU can show).
inline void __threadfence() {}
inline void __threadfence_block() {}
inline void __threadfence_system() {}

// A device-side trap: a fault naming the thread, as a GPU reports an illegal instruction.
[[noreturn]] inline void __trap() { dp::emu::running_block("__trap").fail("__trap() called"); }
