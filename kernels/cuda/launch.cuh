// defines: grid_1d, the launch shape of the elementwise kernels (grid-stride loops, so any
// n fits any grid), and DP_RETURN_LAUNCH, the wrappers' launch check.
//
// Kernels are a library like cuBLAS: a wrapper validates its arguments, launches on the
// caller's stream and returns the launch's status (cudaGetLastError right after the launch,
// so a bad configuration is reported by the call that made it). The caller checks it with the
// runtime's CHECK_CUDA, which adds the expression, file:line and rank (runtime/cuda/check.h).
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace dp::kernels::cuda {

constexpr int kThreads = 256;

// Enough blocks for one element per thread, capped (grid-stride loops do the rest): 2^16
// blocks of 256 threads are ~16M threads, far more than an H100's 132 SMs x 2048 keep busy.
inline unsigned grid_1d(int64_t n, int threads = kThreads) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + threads - 1) / threads, 1, 1 << 16));
}

}  // namespace dp::kernels::cuda

#define DP_RETURN_LAUNCH() return cudaGetLastError()
