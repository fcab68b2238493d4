// defines: the mixed-precision accumulations of the graph: widen_accumulate (a 16-bit gradient
// added into its fp32 master gradient) and add_inplace_16 (16-bit gradients of one activation
// summed over its consumers, in f32 then rounded to nearest even).
//
// 16-bit values are raw bits (uint16_t); `bf16` picks bfloat16, else IEEE half. Returns the
// launch status (check with CHECK_CUDA). Device pointers of n elements, not aliasing. Each pass
// moves 16-byte vectors where the pointers' alignments allow (kernels/cuda/pass_shape.h).
// CPU twins: base/half.h's conversions and a float add (tests/kernels/test_cuda_accumulate).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace dp::kernels::cuda {

// y[i] += f32(x[i]).
[[nodiscard]] cudaError_t widen_accumulate(float* y, const uint16_t* x, int64_t n, bool bf16, cudaStream_t stream);
// dst[i] = round16(f32(dst[i]) + f32(src[i])).
[[nodiscard]] cudaError_t add_inplace_16(uint16_t* dst, const uint16_t* src, int64_t n, bool bf16,
                                         cudaStream_t stream);

}  // namespace dp::kernels::cuda
