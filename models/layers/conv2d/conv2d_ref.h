// defines: Conv2dDims and conv2d_forward / conv2d_backward, the CPU reference of a grouped 2-D
// convolution (PyTorch's nn.Conv2d: NCHW, weight (OC, C/groups, K, K), square kernel).
//
// Algorithm (Caffe's, batched): im2col over a chunk of whole samples into one column matrix
// (C*K*K, nb*OH*OW), then ONE gemm per group for the chunk: few large gemms keep OpenBLAS
// efficient where per-sample gemms would be tiny. The backward reuses the same column matrix:
// dW += dY col^T, dcol = W^T dY, then col2im. Chunks are as large as a fixed workspace budget
// allows (usually the whole batch), so memory stays bounded for large images or batches.
//
// Determinism: OpenMP loops give every output element to exactly one thread and sum in a fixed
// order; gemm (kernels/cpu/blas.h) slices C by shape only. Results are bitwise the same for
// any thread count.
#pragma once
#include <cstdint>

namespace dp::kernels::cpu {

struct Conv2dDims {
  int64_t N, C, H, W;                    // input (N, C, H, W)
  int64_t OC, K, stride, pad, groups;    // weight (OC, C/groups, K, K)
  int64_t OH, OW;                        // output (N, OC, OH, OW)
};

// y (N, OC, OH, OW) = conv(x (N, C, H, W), w) + b (OC) (b may be null).
template <typename T>
void conv2d_forward(T* y, const T* x, const T* w, const T* b, const Conv2dDims& d);

// dw (OC, C/groups, K, K) += ...;  db (OC) += ... (null: no bias);  dx (N, C, H, W) = ... (null: skip).
template <typename T>
void conv2d_backward(T* dx, T* dw, T* db, const T* dy, const T* x, const T* w, const Conv2dDims& d);

}  // namespace dp::kernels::cpu
