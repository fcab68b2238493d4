#include "kernels/cuda/grad_norm.h"
#include "kernels/cuda/block_sum.cuh"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/shared_memory.cuh"
#include "kernels/grad_norm_math.h"

namespace dp::kernels::cuda {
namespace {

// The fold of kernels/grad_norm_math.h (t[j] += t[j + w], w halving from kNormThreads / 2) is
// block_sum's tree, which runs over kThreads threads.
static_assert(kNormThreads == kThreads, "grad_norm's fold is block_sum over a block of kThreads");

// Block c sums chunk c of x.
__global__ void chunk_squares_kernel(const float* x, int64_t n, double* partial) {
  DP_SHARED(double, t, [kNormThreads]);
  const int64_t begin = blockIdx.x * kNormChunk;
  const int64_t m = n - begin < kNormChunk ? n - begin : kNormChunk;
  double s = 0;
  for (int64_t i = threadIdx.x; i < m; i += kNormThreads) {
    const double v = x[begin + i];
    s += v * v;
  }
  const double total = block_sum(t, s);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

// One block sums the chunks' partial sums.
__global__ void total_kernel(const double* partial, int64_t chunks, double* sum_sq) {
  DP_SHARED(double, t, [kNormThreads]);
  double s = 0;
  for (int64_t i = threadIdx.x; i < chunks; i += kNormThreads) s += partial[i];
  const double total = block_sum(t, s);
  if (threadIdx.x == 0) sum_sq[0] = total;
}

__global__ void clip_kernel(float* x, int64_t n, const double* sum_sq, double max_norm) {
  const float c = clip_coefficient(sum_sq[0], max_norm);
  if (c == 1.0f) return;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] = fp::mul(x[i], c);
}

}  // namespace

int64_t sum_of_squares_scratch(int64_t n) { return n <= 0 ? 1 : (n + kNormChunk - 1) / kNormChunk; }

cudaError_t sum_of_squares(const float* x, int64_t n, double* partial, double* sum_sq, cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  const int64_t chunks = n == 0 ? 0 : (n + kNormChunk - 1) / kNormChunk;
  if (chunks > 0) {
    DP_LAUNCH(chunk_squares_kernel, static_cast<unsigned>(chunks), kNormThreads, 0, stream)(x, n, partial);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  DP_LAUNCH(total_kernel, 1, kNormThreads, 0, stream)(partial, chunks, sum_sq);
  DP_RETURN_LAUNCH();
}

cudaError_t clip_by_norm(float* x, int64_t n, const double* sum_sq, double max_norm, cudaStream_t stream) {
  if (n < 0 || !(max_norm > 0)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  DP_LAUNCH(clip_kernel, grid_1d(n), kThreads, 0, stream)(x, n, sum_sq, max_norm);
  DP_RETURN_LAUNCH();
}

}  // namespace dp::kernels::cuda
