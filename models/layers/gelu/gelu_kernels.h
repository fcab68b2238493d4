// defines: the CUDA twins of models/layers/gelu/gelu_ref.h, GELU forward and backward with the
// tanh approximation (GPT-2's) or the exact erf form, element-wise in 16-byte vectors, on an
// explicit stream. Every element is computed in f32 (a 16-bit element widened, the result rounded
// to nearest even once); the CPU twin computes in f64, so f32 results agree within a few f32 ulps
// of the inputs' scale (the tests' bound), 16-bit ones within one ulp of their format.
//
// Device pointers; dtype F32, BF16 or F16 (raw 16-bit bits), else cudaErrorInvalidValue, as is
// n < 0; n = 0 launches nothing. Returns the launch status (check with CHECK_CUDA).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "base/dtype.h"

namespace dp::kernels::cuda {

// y (n) = gelu(x); y may alias x.
[[nodiscard]] cudaError_t gelu_forward(DType dtype, void* y, const void* x, int64_t n, bool tanh_approximation,
                                       cudaStream_t stream);
// dx (n) = dy * gelu'(x) (x: the forward's input); dx may alias dy or x (each element is read
// before it is written, by the thread that writes it).
[[nodiscard]] cudaError_t gelu_backward(DType dtype, void* dx, const void* dy, const void* x, int64_t n,
                                        bool tanh_approximation, cudaStream_t stream);

}  // namespace dp::kernels::cuda
