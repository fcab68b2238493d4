// defines: the elementwise half of batch norm on the GPU, with the fused epilogues of the GPU
// plan (runtime/fusion_plan.h: a ReLU, or a residual add then a ReLU, folded into the batch norm):
//   batchnorm_apply           y = act((x - mean[c]) * scale[c] + shift[c] [+ r])
//   batchnorm_backward_apply  g = dy [* (y > 0)]; dx = (k[c] g + c1[c]) - (x - mean[c]) c2[c]; r's gradient = g
//   batchnorm_coefficients    mean, invstd, scale (f32) from f64 statistics (SyncBN's, eval's)
//   batchnorm_epilogue        y = relu(y [+ r]) in place: the epilogue after cuDNN's forward
//   batchnorm_relu_mask       g = dy * (y > 0): the epilogue's gradient before cuDNN's backward
// act is the identity or ReLU. NCHW and NHWC activations of f32, bf16 or f16; 16-byte loads and
// stores where the layout and the pointers allow (batchnorm2d_reduce.h says when), one value
// at a time otherwise. Arithmetic in f32, each output rounded once to the data type. The ReLU's
// mask is y > 0 on the layer's (rounded) output, as ReLU's own backward and torch's
// threshold_backward use. Per-channel arrays are f32 device pointers (batchnorm2d_reduce.h writes
// them). Every wrapper validates its arguments (cudaErrorInvalidValue before any launch),
// launches on `stream` and returns cudaGetLastError().
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "base/dtype.h"
#include "models/layers/batchnorm2d/batchnorm2d_kernels.h"

namespace dp::kernels::cuda {

// y (N, C, HW) = act((x - mean[c]) * scale[c] + shift[c] + r) with r (same layout) when not null;
// act = ReLU when relu. y may be x (in place).
[[nodiscard]] cudaError_t batchnorm_apply(void* y, const void* x, const void* r, bool relu, DType dtype,
                                          const float* mean, const float* scale, const float* shift, const BnDims& d,
                                          cudaStream_t stream);

// g = dy, or dy * (relu_y > 0) when relu_y is not null; dx = (k[c] g + c1[c]) - (x - mean[c]) c2[c]
// when dx is not null; dr = g when dr is not null (the residual's gradient). One of dx, dr at least.
[[nodiscard]] cudaError_t batchnorm_backward_apply(void* dx, void* dr, const void* dy, const void* relu_y,
                                                   const void* x, DType dtype, const float* mean, const float* k,
                                                   const float* c1, const float* c2, const BnDims& d,
                                                   cudaStream_t stream);

// mean (C) = f32(mean64), invstd (C) = f32(invstd64), scale (C) = f32(w * invstd64).
[[nodiscard]] cudaError_t batchnorm_coefficients(float* mean, float* invstd, float* scale, const double* mean64,
                                                 const double* invstd64, const float* w, int64_t C,
                                                 cudaStream_t stream);

// y (n values, any layout) = relu(y + r) (r null: relu(y)).
[[nodiscard]] cudaError_t batchnorm_epilogue(void* y, const void* r, DType dtype, int64_t n, cudaStream_t stream);
// g (n values) = dy * (y > 0); g may be dy.
[[nodiscard]] cudaError_t batchnorm_relu_mask(void* g, const void* dy, const void* y, DType dtype, int64_t n,
                                              cudaStream_t stream);

}  // namespace dp::kernels::cuda
