// Correct kernels run on the emulator and give exact results: a shared-memory block reduction, a
// tiled transpose, a warp-shuffle reduction, a grid-stride loop over n not a multiple of the
// grid, and the block/thread coordinates of a 3-D launch.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/shared_memory.cuh"
#include "tests/kernels/emu/block_sum_kernel.h"
#include "tests/kernels/emu/emu_test_util.h"

namespace dp::emu::test {
namespace {

constexpr int kThreads = 256;

TEST(EmuCorrectKernels, BlockReductionIsExact) {
  const int blocks = 37;
  std::vector<int64_t> x(blocks * kThreads);
  std::iota(x.begin(), x.end(), int64_t{-1000});
  DeviceArray<int64_t> dx(x), dout(blocks);
  DP_LAUNCH(block_sum_kernel<int64_t>, blocks, kThreads, 0, cudaStream_t{})(dout.get(), dx.get());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const std::vector<int64_t> out = dout.download();
  for (int b = 0; b < blocks; ++b) {
    const int64_t first = -1000 + int64_t{b} * kThreads;
    EXPECT_EQ(out[b], kThreads * first + kThreads * (kThreads - 1) / 2) << "block " << b;
  }
}

constexpr int kTile = 32, kRows = 8;

// y (cols, rows) = x (rows, cols)^T through a padded shared tile, a 32 x 8 block per 32 x 32 tile.
__global__ void transpose_kernel(float* y, const float* x, int rows, int cols) {
  DP_SHARED(float, tile, [kTile][kTile + 1]);
  const int c0 = blockIdx.x * kTile, r0 = blockIdx.y * kTile;
  for (int i = threadIdx.y; i < kTile; i += kRows)
    if (r0 + i < rows && c0 + int(threadIdx.x) < cols) tile[i][threadIdx.x] = x[(r0 + i) * cols + c0 + threadIdx.x];
  __syncthreads();
  for (int i = threadIdx.y; i < kTile; i += kRows)
    if (c0 + i < cols && r0 + int(threadIdx.x) < rows) y[(c0 + i) * rows + r0 + threadIdx.x] = tile[threadIdx.x][i];
}

TEST(EmuCorrectKernels, TiledTransposeIsExact) {
  const int rows = 45, cols = 70;  // neither a multiple of the tile
  std::vector<float> x(rows * cols);
  std::iota(x.begin(), x.end(), 0.0f);
  DeviceArray<float> dx(x), dy(rows * cols);
  const dim3 grid((cols + kTile - 1) / kTile, (rows + kTile - 1) / kTile);
  DP_LAUNCH(transpose_kernel, grid, dim3(kTile, kRows), 0, cudaStream_t{})(dy.get(), dx.get(), rows, cols);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const std::vector<float> y = dy.download();
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) ASSERT_EQ(y[c * rows + r], x[r * cols + c]) << r << "," << c;
}

// Each warp sums its 32 values with a butterfly of __shfl_xor_sync; lane 0 writes the sum, and a
// __shfl_down_sync pass and a ballot are checked on the way.
__global__ void warp_sum_kernel(int* sums, unsigned* ballots, int* down, const int* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = i < n ? x[i] : 0;
  const unsigned ballot = __ballot_sync(0xFFFFFFFFu, v % 2 != 0);
  const int next = __shfl_down_sync(0xFFFFFFFFu, v, 1);
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
  if (i < n) down[i] = next;
  if (threadIdx.x % 32 == 0) {
    sums[i / 32] = v;
    ballots[i / 32] = ballot;
  }
}

TEST(EmuCorrectKernels, WarpShuffleReductionIsExact) {
  const int n = 4 * 128;  // 4 blocks of 4 warps
  std::vector<int> x(n);
  for (int i = 0; i < n; ++i) x[i] = i * i % 97 - 40;
  DeviceArray<int> dx(x), dsums(n / 32), ddown(n);
  DeviceArray<unsigned> dballots(n / 32);
  DP_LAUNCH(warp_sum_kernel, 4, 128, 0, cudaStream_t{})(dsums.get(), dballots.get(), ddown.get(), dx.get(), n);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const auto sums = dsums.download();
  const auto ballots = dballots.download();
  const auto down = ddown.download();
  for (int w = 0; w < n / 32; ++w) {
    int sum = 0;
    unsigned ballot = 0;
    for (int l = 0; l < 32; ++l) {
      sum += x[w * 32 + l];
      ballot |= (x[w * 32 + l] % 2 != 0 ? 1u : 0u) << l;
      // shfl_down by 1: lane 31 has no lane 32 in its warp and keeps its own value.
      EXPECT_EQ(down[w * 32 + l], x[w * 32 + (l == 31 ? 31 : l + 1)]) << "lane " << l;
    }
    EXPECT_EQ(sums[w], sum) << "warp " << w;
    EXPECT_EQ(ballots[w], ballot) << "warp " << w;
  }
}

__global__ void grid_stride_kernel(int* y, const int* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = x[i] * 3 + 1;
}

TEST(EmuCorrectKernels, GridStrideLoopCoversEveryElementOnce) {
  const int64_t n = 10007;  // prime: no grid shape divides it
  std::vector<int> x(n);
  std::iota(x.begin(), x.end(), 0);
  DeviceArray<int> dx(x), dy(n);
  DP_LAUNCH(grid_stride_kernel, 7, 96, 0, cudaStream_t{})(dy.get(), dx.get(), n);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const auto y = dy.download();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], x[i] * 3 + 1) << i;
}

// Every thread of a 3-D grid of 3-D blocks writes its coordinates at its linear global index.
__global__ void coords_kernel(uint32_t* out) {
  const unsigned block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned thread = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const unsigned i = block * blockDim.x * blockDim.y * blockDim.z + thread;
  out[i] = threadIdx.x | threadIdx.y << 8 | threadIdx.z << 16 | blockIdx.x << 20 | blockIdx.y << 24 | blockIdx.z << 28;
}

TEST(EmuCorrectKernels, ThreeDimensionalCoordinates) {
  const dim3 grid(3, 2, 2), block(5, 4, 3);
  const int n = 3 * 2 * 2 * 5 * 4 * 3;
  DeviceArray<uint32_t> dout(n);
  DP_LAUNCH(coords_kernel, grid, block, 0, cudaStream_t{})(dout.get());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const auto out = dout.download();
  int i = 0;
  for (unsigned bz = 0; bz < 2; ++bz)
    for (unsigned by = 0; by < 2; ++by)
      for (unsigned bx = 0; bx < 3; ++bx)
        for (unsigned tz = 0; tz < 3; ++tz)
          for (unsigned ty = 0; ty < 4; ++ty)
            for (unsigned tx = 0; tx < 5; ++tx, ++i)
              ASSERT_EQ(out[i], tx | ty << 8 | tz << 16 | bx << 20 | by << 24 | bz << 28) << i;
}

// __syncthreads_count/and/or and the dynamic shared memory of the launch.
__global__ void barrier_reductions_kernel(int* out, int n) {
  DP_DYNAMIC_SHARED(int, scratch);
  scratch[threadIdx.x] = int(threadIdx.x);
  const int count = __syncthreads_count(threadIdx.x < unsigned(n));
  const int all = __syncthreads_and(threadIdx.x < unsigned(n));
  const int any = __syncthreads_or(threadIdx.x == unsigned(n));
  if (threadIdx.x == 0) {
    out[0] = count;
    out[1] = all;
    out[2] = any;
    out[3] = scratch[blockDim.x - 1];
  }
}

TEST(EmuCorrectKernels, BarrierReductionsAndDynamicSharedMemory) {
  DeviceArray<int> dout(4);
  DP_LAUNCH(barrier_reductions_kernel, 1, 64, 64 * sizeof(int), cudaStream_t{})(dout.get(), 40);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(dout.download(), (std::vector<int>{40, 0, 1, 63}));
}

}  // namespace
}  // namespace dp::emu::test
