// defines: the filter layout changes of the channels-last convolution: KCRS (PyTorch's
// state-dict order, how the parameter arena holds a conv weight and its gradient) to KRSC
// (cuDNN's NHWC filter format) for the weight, and KRSC back into KCRS, added, for its gradient.
//
// Sizes: k output channels, c input channels per group, r x s kernel. Device pointers of
// k * c * r * s elements; y may not alias x. 16-bit values are raw bits (uint16_t), as
// base/half.h and Tensor hold them. Returns the launch status (check with CHECK_CUDA);
// a negative size is cudaErrorInvalidValue before any CUDA call, an empty filter launches nothing.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace dp::kernels::cuda {

// y (k, r, s, c) = x (k, c, r, s). The 16-bit overload copies bits: bf16 and f16 alike.
[[nodiscard]] cudaError_t filter_kcrs_to_krsc(float* y, const float* x, int64_t k, int64_t c, int64_t r, int64_t s,
                                              cudaStream_t stream);
[[nodiscard]] cudaError_t filter_kcrs_to_krsc(uint16_t* y, const uint16_t* x, int64_t k, int64_t c, int64_t r,
                                              int64_t s, cudaStream_t stream);

// y (k, c, r, s) += x (k, r, s, c): a gradient computed in KRSC accumulated into the bound KCRS
// one. bf16/f16: both widened to f32, added, rounded once to nearest even.
[[nodiscard]] cudaError_t filter_krsc_add_to_kcrs_f32(float* y, const float* x, int64_t k, int64_t c, int64_t r,
                                                      int64_t s, cudaStream_t stream);
[[nodiscard]] cudaError_t filter_krsc_add_to_kcrs_bf16(uint16_t* y, const uint16_t* x, int64_t k, int64_t c,
                                                       int64_t r, int64_t s, cudaStream_t stream);
[[nodiscard]] cudaError_t filter_krsc_add_to_kcrs_f16(uint16_t* y, const uint16_t* x, int64_t k, int64_t c,
                                                      int64_t r, int64_t s, cudaStream_t stream);

}  // namespace dp::kernels::cuda
