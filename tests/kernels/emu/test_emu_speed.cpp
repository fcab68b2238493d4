// The emulator's speed on the shapes the project's kernels launch (printed, and recorded in the
// test's XML output): an element-wise kernel over 1M elements (4096 blocks of 256 threads, one
// element per thread) and a shared-memory block reduction over 1M elements (a barrier per level).
// The results are checked exactly; the time is bounded only loosely (a 2-core CI machine under
// ASan), to catch a scheduler that degrades to something quadratic.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <vector>

#include "kernels/cuda/emu/options.h"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/shared_memory.cuh"
#include "tests/kernels/emu/block_sum_kernel.h"
#include "tests/kernels/emu/emu_test_util.h"

namespace dp::emu::test {
namespace {

constexpr int kThreads = 256;
constexpr int kN = 1 << 20;

__global__ void axpy_kernel(float* y, const float* x, float a, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = __fmaf_rn(a, x[i], y[i]);
}

template <typename F>
double time_ms(F f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void report(const char* what, double ms) {
  std::printf("[   EMU    ] %s: %.1f ms\n", what, ms);
  ::testing::Test::RecordProperty(what, static_cast<int>(ms));
}

TEST(EmuSpeed, ElementwiseOverOneMillionElements) {
  DeviceArray<float> x(std::vector<float>(kN, 2.0f)), y(std::vector<float>(kN, 1.0f));
  const double ms = time_ms([&] {
    DP_LAUNCH(axpy_kernel, kN / kThreads, kThreads, 0, cudaStream_t{})(y.get(), x.get(), 3.0f, kN);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  });
  report("elementwise_1M_ms", ms);
  EXPECT_EQ(y.download(), std::vector<float>(kN, 7.0f));
  EXPECT_LT(ms, 20000.0);
}

void block_sums(bool racecheck) {
  set_racecheck(racecheck);
  std::vector<float> hx(kN);
  for (int i = 0; i < kN; ++i) hx[i] = float(i % kThreads);
  DeviceArray<float> x(hx), out(kN / kThreads);
  const double ms = time_ms([&] {
    DP_LAUNCH(block_sum_kernel<float>, kN / kThreads, kThreads, 0, cudaStream_t{})(out.get(), x.get());
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  });
  set_racecheck(false);
  report(racecheck ? "block_reduction_1M_racecheck_ms" : "block_reduction_1M_ms", ms);
  EXPECT_EQ(out.download(), std::vector<float>(kN / kThreads, kThreads * (kThreads - 1) / 2.0f));
  EXPECT_LT(ms, 60000.0);
}

TEST(EmuSpeed, BlockReductionOverOneMillionElements) { block_sums(false); }
TEST(EmuSpeed, BlockReductionOverOneMillionElementsWithRacecheck) { block_sums(true); }

}  // namespace
}  // namespace dp::emu::test
