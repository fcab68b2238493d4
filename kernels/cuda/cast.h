// defines: f32 <-> bf16 / f16 conversions and the dynamic-loss-scaling check, f32 gradients
// unscaled in place with a "found inf/nan" flag (PyTorch's _amp_foreach_non_finite_check_and_unscale_).
//
// 16-bit values are raw bits (uint16_t), as base/half.h and Tensor hold them. Rounding
// is to nearest even, with subnormals, as the CPU conversions: equal bit for bit except that a
// NaN becomes the hardware's canonical NaN (still a NaN, sign and payload not kept).
// Returns the launch status (check with CHECK_CUDA). Device pointers of n elements; y may not
// alias x (different element sizes). Each pass moves 16-byte vectors where the pointers'
// alignments allow (kernels/cuda/pass_shape.h).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "base/dtype.h"

namespace dp::kernels::cuda {

[[nodiscard]] cudaError_t f32_to_bf16(uint16_t* y, const float* x, int64_t n, cudaStream_t stream);
[[nodiscard]] cudaError_t bf16_to_f32(float* y, const uint16_t* x, int64_t n, cudaStream_t stream);
[[nodiscard]] cudaError_t f32_to_f16(uint16_t* y, const float* x, int64_t n, cudaStream_t stream);
[[nodiscard]] cudaError_t f16_to_f32(float* y, const uint16_t* x, int64_t n, cudaStream_t stream);

// The same by dtype: y (n, dtype) = x (n, f32) narrowed, or y (n, f32) = x (n, dtype) widened, for
// dtype BF16 or F16 (another is cudaErrorInvalidValue): the mixed-precision casts of a compute dtype.
[[nodiscard]] cudaError_t narrow_from_f32(DType dtype, void* y, const float* x, int64_t n, cudaStream_t stream);
[[nodiscard]] cudaError_t widen_to_f32(DType dtype, float* y, const void* x, int64_t n, cudaStream_t stream);

// g (n) *= inv_scale in place, over the fp32 gradient arena (16-bit wire buckets are widened into it
// first, collectives/reducer/); if any g is inf or NaN, *found_inf = 1 (else left as it was: the
// caller zeroes it once per step and may run this over several buffers). found_inf: one device
// float, the flag torch's GradScaler uses; the host reads it (or a kernel tests it) to skip the
// step and lower the scale. g gets every element either way.
[[nodiscard]] cudaError_t unscale_f32(float* g, int64_t n, float inv_scale, float* found_inf, cudaStream_t stream);

}  // namespace dp::kernels::cuda
