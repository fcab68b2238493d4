#include <algorithm>

#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/shared_memory.cuh"
#include "kernels/cuda/layout.h"

namespace dp::kernels::cuda {

TransposeDims layout_transpose_dims(bool to_nhwc, int64_t N, int64_t C, int64_t H, int64_t W) {
  // NCHW -> NHWC transposes each sample's (C, HW) matrix; NHWC -> NCHW each (HW, C) one.
  return to_nhwc ? TransposeDims{N, C, H * W} : TransposeDims{N, H * W, C};
}

namespace {

constexpr int kTile = 32;
constexpr int kRowsPerPass = 8;  // a 32 x 8 block moves a 32 x 32 tile in 4 passes

// y (batch, cols, rows) = x (batch, rows, cols)^T through a shared tile, so that both the reads
// and the writes are coalesced (the classic tiled transpose; +1 column avoids bank conflicts).
// Elements are moved as raw bits (E: 2 or 4 bytes). Tiles: x over column tiles, y over row
// tiles, z (grid-stride) over the batch.
template <typename E>
__global__ void transpose_kernel(E* y, const E* x, int64_t batch, int64_t rows, int64_t cols) {
  DP_SHARED(E, tile, [kTile][kTile + 1]);
  const int64_t c0 = int64_t(blockIdx.x) * kTile, r0 = int64_t(blockIdx.y) * kTile;
  for (int64_t b = blockIdx.z; b < batch; b += gridDim.z) {
    const E* xb = x + b * rows * cols;
    E* yb = y + b * rows * cols;
    for (int i = threadIdx.y; i < kTile; i += kRowsPerPass) {
      const int64_t r = r0 + i, c = c0 + threadIdx.x;
      if (r < rows && c < cols) tile[i][threadIdx.x] = xb[r * cols + c];
    }
    __syncthreads();
    for (int i = threadIdx.y; i < kTile; i += kRowsPerPass) {
      const int64_t c = c0 + i, r = r0 + threadIdx.x;  // y's row c, column r
      if (r < rows && c < cols) yb[c * rows + r] = tile[threadIdx.x][i];
    }
    __syncthreads();  // the tile is reused by the next sample
  }
}

cudaError_t transpose(DType dtype, void* y, const void* x, const TransposeDims& d, cudaStream_t stream) {
  if (d.batch < 0 || d.rows < 0 || d.cols < 0) return cudaErrorInvalidValue;
  if (dtype != DType::F32 && dtype != DType::BF16 && dtype != DType::F16) return cudaErrorInvalidValue;
  if (d.batch == 0 || d.rows == 0 || d.cols == 0) return cudaSuccess;
  const int64_t col_tiles = (d.cols + kTile - 1) / kTile, row_tiles = (d.rows + kTile - 1) / kTile;
  // gridDim.y and gridDim.z are at most 65535; x allows 2^31 - 1.
  if (row_tiles > 65535 || col_tiles > 0x7FFFFFFF) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(col_tiles), static_cast<unsigned>(row_tiles),
                  static_cast<unsigned>(std::min<int64_t>(d.batch, 65535)));
  const dim3 block(kTile, kRowsPerPass);
  if (dtype == DType::F32)
    DP_LAUNCH(transpose_kernel<uint32_t>, grid, block, 0, stream)(
        static_cast<uint32_t*>(y), static_cast<const uint32_t*>(x), d.batch, d.rows, d.cols);
  else
    DP_LAUNCH(transpose_kernel<uint16_t>, grid, block, 0, stream)(
        static_cast<uint16_t*>(y), static_cast<const uint16_t*>(x), d.batch, d.rows, d.cols);
  DP_RETURN_LAUNCH();
}

bool dims_ok(int64_t N, int64_t C, int64_t H, int64_t W) { return N >= 0 && C >= 0 && H >= 0 && W >= 0; }

}  // namespace

cudaError_t nchw_to_nhwc(DType dtype, void* y, const void* x, int64_t N, int64_t C, int64_t H, int64_t W,
                         cudaStream_t stream) {
  if (!dims_ok(N, C, H, W)) return cudaErrorInvalidValue;
  return transpose(dtype, y, x, layout_transpose_dims(true, N, C, H, W), stream);
}

cudaError_t nhwc_to_nchw(DType dtype, void* y, const void* x, int64_t N, int64_t C, int64_t H, int64_t W,
                         cudaStream_t stream) {
  if (!dims_ok(N, C, H, W)) return cudaErrorInvalidValue;
  return transpose(dtype, y, x, layout_transpose_dims(false, N, C, H, W), stream);
}

}  // namespace dp::kernels::cuda
