#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/optim.h"
#include "kernels/optim_math.h"

namespace dp::kernels::cuda {
namespace {

// The scalars travel by value in the kernel's parameter space (constant bank), one copy for
// every thread.
// skips: the spans weight decay leaves out (count 0: none).
__global__ void sgd_kernel(float* p, const float* g, float* buf, int64_t n, SgdScalars s, DecaySkips skips) {
  const SgdScalars plain = without_decay(s);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    float pi = p[i], bi = 0.0f;
    if (buf && !s.first_step) bi = buf[i];
    sgd_update(pi, g[i], bi, skips.count > 0 && decay_skipped(skips, i) ? plain : s);
    p[i] = pi;
    if (buf) buf[i] = bi;
  }
}

__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, int64_t n, AdamWScalars s,
                             DecaySkips skips) {
  const AdamWScalars plain = without_decay(s);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    float pi = p[i], mi = m[i], vi = v[i];
    adamw_update(pi, g[i], mi, vi, skips.count > 0 && decay_skipped(skips, i) ? plain : s);
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
  }
}

}  // namespace

cudaError_t sgd_step(float* p, const float* g, float* buf, int64_t n, const SgdScalars& s, cudaStream_t stream) {
  return sgd_step(p, g, buf, n, s, DecaySkips{}, stream);
}

cudaError_t adamw_step(float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s,
                       cudaStream_t stream) {
  return adamw_step(p, g, m, v, n, s, DecaySkips{}, stream);
}

cudaError_t sgd_step(float* p, const float* g, float* buf, int64_t n, const SgdScalars& s, const DecaySkips& skips,
                     cudaStream_t stream) {
  if (n < 0 || (s.momentum != 0.0f && !buf) || skips.count < 0 || (skips.count > 0 && !skips.bounds))
    return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  DP_LAUNCH(sgd_kernel, grid_1d(n), kThreads, 0, stream)(p, g, s.momentum != 0.0f ? buf : nullptr, n, s, skips);
  DP_RETURN_LAUNCH();
}

cudaError_t adamw_step(float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s,
                       const DecaySkips& skips, cudaStream_t stream) {
  if (n < 0 || skips.count < 0 || (skips.count > 0 && !skips.bounds)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  DP_LAUNCH(adamw_kernel, grid_1d(n), kThreads, 0, stream)(p, g, m, v, n, s, skips);
  DP_RETURN_LAUNCH();
}

}  // namespace dp::kernels::cuda
