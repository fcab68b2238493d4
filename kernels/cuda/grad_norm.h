// defines: sum_of_squares and clip_by_norm, the global gradient norm and clip_grad_norm_ over the
// flat gradient arena on the device, with no host round trip: the sum stays in device memory and
// the clip kernel reads it. CUDA twins of kernels/cpu/grad_norm.h, the same bits (the order of
// kernels/grad_norm_math.h: a deterministic reduction, no atomics).
//
// Returns the launch status (check with CHECK_CUDA). Device pointers.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace dp::kernels::cuda {

// How many doubles of scratch sum_of_squares needs for n elements: one per chunk.
int64_t sum_of_squares_scratch(int64_t n);
// sum_sq[0] = sum_i x[i]^2 (double). partial: sum_of_squares_scratch(n) doubles. n >= 0 (n == 0
// writes 0).
[[nodiscard]] cudaError_t sum_of_squares(const float* x, int64_t n, double* partial, double* sum_sq,
                                         cudaStream_t stream);
// x (n) *= clip_coefficient(sum_sq[0], max_norm) when that is below 1; sum_sq is read on the device.
[[nodiscard]] cudaError_t clip_by_norm(float* x, int64_t n, const double* sum_sq, double max_norm,
                                       cudaStream_t stream);

}  // namespace dp::kernels::cuda
