// defines: nchw_to_nhwc and nhwc_to_nchw, the memory-layout transposes of a 4-D activation
// [N, C, H, W] (f32, bf16 or f16), each on an explicit stream; and layout_transpose_dims, the
// batched-matrix view both use (a pure function, tested on the host).
//
// NCHW memory is, per sample, a (C, H W) row-major matrix; NHWC memory is its transpose (H W, C).
// So both directions are one batched transpose, of (C, HW) or of (HW, C). Used where a
// channels-last activation meets a layer that needs PyTorch's NCHW order (flatten before a
// linear layer) and back. Returns the launch status (check with CHECK_CUDA); device pointers,
// y must not alias x; a negative dimension or another dtype is cudaErrorInvalidValue.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/host_device.h"
#include "base/dtype.h"

namespace dp::kernels::cuda {

// y (N, H, W, C) = x (N, C, H, W) in memory.
[[nodiscard]] cudaError_t nchw_to_nhwc(DType dtype, void* y, const void* x, int64_t N, int64_t C, int64_t H,
                                       int64_t W, cudaStream_t stream);
// y (N, C, H, W) = x (N, H, W, C) in memory.
[[nodiscard]] cudaError_t nhwc_to_nchw(DType dtype, void* y, const void* x, int64_t N, int64_t C, int64_t H,
                                       int64_t W, cudaStream_t stream);

// Where logical NCHW element i (its row-major index in [N, C, H, W]) lies in NHWC memory.
DP_HD int64_t nhwc_offset(int64_t i, int64_t C, int64_t H, int64_t W) {
  const int64_t w = i % W, h = (i / W) % H, c = (i / (W * H)) % C, n = i / (W * H * C);
  return ((n * H + h) * W + w) * C + c;
}

// The batched transpose y (batch, cols, rows) = x (batch, rows, cols)^T that a layout change is.
struct TransposeDims {
  int64_t batch = 0, rows = 0, cols = 0;
};
TransposeDims layout_transpose_dims(bool to_nhwc, int64_t N, int64_t C, int64_t H, int64_t W);

}  // namespace dp::kernels::cuda
