// defines: the CUDA twin of kernels/cpu/pool2d.h's global average pooling
// (F.adaptive_avg_pool2d(x, 1)) for NCHW and NHWC input of f32, bf16 or f16, f32 accumulation.
//
// The output (N, C) is layout-free: [N, C, 1, 1] is the same memory in NCHW and NHWC. Each plane
// is summed in a fixed order (NCHW: one warp per plane, a fixed butterfly; NHWC: one thread per
// (n, c), rows in order): deterministic. The CPU twin sums in double; f32 here differs by f32
// rounding of the plane's sum. Pointers are device pointers; 16-bit values are read as float and
// the result rounded once. Returns the launch status (check with CHECK_CUDA); invalid arguments
// give cudaErrorInvalidValue before any launch.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "base/dtype.h"

namespace dp::kernels::cuda {

// y (N, C) = mean over the HW pixels of each (n, c) plane of x (N, C, HW), stored NCHW or
// (nhwc) NHWC. N, C >= 0, HW >= 1; dtype F32, BF16 or F16 (x and y alike).
[[nodiscard]] cudaError_t global_avgpool_forward(void* y, const void* x, DType dtype, int64_t N, int64_t C,
                                                 int64_t HW, bool nhwc, cudaStream_t stream);
// dx (N, C, HW) = dy[n, c] / HW at every pixel (overwritten), in x's layout.
[[nodiscard]] cudaError_t global_avgpool_backward(void* dx, const void* dy, DType dtype, int64_t N, int64_t C,
                                                  int64_t HW, bool nhwc, cudaStream_t stream);

}  // namespace dp::kernels::cuda
