// defines: the CUDA twins of kernels/cpu/elementwise.h (relu, add) plus scale, divide and
// bias_add, f32, each on an explicit stream.
//
// Every wrapper returns the launch status (kernels/cuda/launch.cuh); check it with CHECK_CUDA.
// Pointers are device pointers; n == 0 launches nothing. Results equal the CPU twins bit for
// bit (each element is one IEEE operation or a select).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace dp::kernels::cuda {

// y (n) = max(x, 0); NaN passes, as in torch (cpu::relu_forward). y may alias x.
[[nodiscard]] cudaError_t relu_forward(float* y, const float* x, int64_t n, cudaStream_t stream);
// dx (n) = y > 0 ? dy : 0 (cpu::relu_backward: threshold_backward on the output).
[[nodiscard]] cudaError_t relu_backward(float* dx, const float* dy, const float* y, int64_t n, cudaStream_t stream);
// y (n) = a + b (cpu::add: the residual join's forward). y may alias a or b.
[[nodiscard]] cudaError_t add(float* y, const float* a, const float* b, int64_t n, cudaStream_t stream);
// dst (n) += src (cpu::add_inplace: gradient accumulation over consumers).
[[nodiscard]] cudaError_t add_inplace(float* dst, const float* src, int64_t n, cudaStream_t stream);
// y (n) = alpha * x (cpu::scale). y may alias x (gradient clipping, loss-scale changes).
[[nodiscard]] cudaError_t scale(float* y, const float* x, float alpha, int64_t n, cudaStream_t stream);
// x (n) = x / divisor, divided (not multiplied by 1/divisor), as cpu::divide for F32: the second
// half of an average all-reduce.
[[nodiscard]] cudaError_t divide(float* x, int64_t n, int divisor, cudaStream_t stream);
// y (outer, channels, inner) += b (channels): a linear layer's bias (inner = 1, as
// cpu::linear_forward) or an NCHW convolution's (inner = H * W).
[[nodiscard]] cudaError_t bias_add(float* y, const float* b, int64_t outer, int64_t channels, int64_t inner,
                                   cudaStream_t stream);

}  // namespace dp::kernels::cuda
