// The real (nvcc) expansions of DP_LAUNCH, DP_SHARED and DP_DYNAMIC_SHARED, compiled for sm_90
// by the build (tests/kernels/emu/CMakeLists.txt) so that they keep compiling; never run.
#include <cuda_runtime.h>

#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/shared_memory.cuh"

namespace {

template <typename T, int N, bool kTwice>
__global__ void tile_kernel(T* y, const T* x, int n) {
  DP_SHARED(T, tile, [N][N + 1]);
  DP_SHARED(float, part, [N]);
  DP_DYNAMIC_SHARED(float, extra);
  const int i = threadIdx.x;
  tile[i % N][i / N % N] = i < n ? x[i] : T(0);
  part[i % N] = 1.0f;
  extra[i] = 2.0f;
  __syncthreads();
  if (i < n) y[i] = kTwice ? tile[i / N % N][i % N] * T(2) : tile[i / N % N][i % N];
}

}  // namespace

cudaError_t dp_nvcc_launch_check(float* y, const float* x, int n, cudaStream_t stream) {
  DP_LAUNCH(tile_kernel<float, 16, true>, dim3((n + 255) / 256), 256, 256 * sizeof(float), stream)(y, x, n);
  return cudaGetLastError();
}
