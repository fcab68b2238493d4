// defines: the CUDA twins of kernels/cpu/elementwise.h (relu, add) plus scale, divide and
// bias_add, f32, each on an explicit stream; typed entry points (f32, bf16, f16) of relu, add
// and add_inplace for the layers under mixed precision, and bias_grad (a bias's gradient).
//
// Every wrapper returns the launch status (kernels/cuda/launch.cuh); check it with CHECK_CUDA.
// The element-wise passes (all but bias_grad) move 16-byte vectors where their pointers'
// alignments allow, with a scalar head and tail, in grid-stride loops sized to the device's SM
// count (kernels/cuda/pass_shape.h); bias_grad is a reduction, one block per channel.
// Pointers are device pointers; n == 0 launches nothing. Results equal the CPU twins bit for
// bit (each element is one IEEE operation or a select).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "base/dtype.h"

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

// Typed entry points: dtype F32, BF16 or F16 (16-bit values as raw bits); any other dtype is
// cudaErrorInvalidValue. F32 runs the very kernels above. A 16-bit element is widened to f32,
// computed as in f32 and rounded to nearest even once (PyTorch's rule for bf16/f16 elementwise
// ops); relu and its backward are selects and keep the input's bits.
bool elementwise_dtype_supported(DType dtype);
[[nodiscard]] cudaError_t relu_forward(DType dtype, void* y, const void* x, int64_t n, cudaStream_t stream);
[[nodiscard]] cudaError_t relu_backward(DType dtype, void* dx, const void* dy, const void* y, int64_t n,
                                        cudaStream_t stream);
[[nodiscard]] cudaError_t add(DType dtype, void* y, const void* a, const void* b, int64_t n, cudaStream_t stream);
[[nodiscard]] cudaError_t add_inplace(DType dtype, void* dst, const void* src, int64_t n, cudaStream_t stream);

// y (outer, channels, inner) += b (channels) in dtype (F32: the kernel above; 16-bit: widened,
// added in f32, rounded once).
[[nodiscard]] cudaError_t bias_add(DType dtype, void* y, const void* b, int64_t outer, int64_t channels, int64_t inner,
                                   cudaStream_t stream);

// db (channels) += sum over (outer, inner) of dy (outer, channels, inner): a linear layer's bias
// gradient (inner = 1), an NCHW convolution's (inner = H * W) or an NHWC one's (outer = N H W,
// inner = 1). One block per channel sums in f32 in a fixed order (deterministic), then adds
// to db once, rounded to dtype (F32, BF16, F16).
[[nodiscard]] cudaError_t bias_grad(DType dtype, void* db, const void* dy, int64_t outer, int64_t channels,
                                    int64_t inner, cudaStream_t stream);

}  // namespace dp::kernels::cuda
