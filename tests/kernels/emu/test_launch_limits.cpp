// Launch shapes: launch_problem's verdict on each sm_90 limit, and DP_LAUNCH refusing a launch
// CUDA would refuse (cudaErrorInvalidConfiguration, the kernel not run), in the emulation build.
#include <cuda_runtime.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/launch_limits.h"
#include "kernels/cuda/shared_memory.cuh"
#include "tests/kernels/emu/emu_test_util.h"

namespace dp::emu::test {
namespace {

using dp::kernels::cuda::kSm90;
using dp::kernels::cuda::launch_problem;
using ::testing::HasSubstr;

constexpr size_t k48K = 48 * 1024;

TEST(LaunchLimits, ShapesWithinTheLimitsPass) {
  EXPECT_EQ(launch_problem(dim3(65536), dim3(256), 0, k48K), "");
  EXPECT_EQ(launch_problem(dim3(0x7FFFFFFF, 65535, 65535), dim3(1024), 0, k48K), "");
  EXPECT_EQ(launch_problem(dim3(1), dim3(32, 32), k48K, k48K), "");
  EXPECT_EQ(launch_problem(dim3(1), dim3(4, 4, 64), 0, k48K), "");
  EXPECT_EQ(launch_problem(dim3(1), dim3(1), 227 * 1024, 227 * 1024), "");
}

TEST(LaunchLimits, EachLimitIsNamed) {
  EXPECT_EQ(launch_problem(dim3(1), dim3(1025), 0, k48K), "blockDim.x = 1025 exceeds 1024");
  EXPECT_EQ(launch_problem(dim3(1), dim3(64, 32), 0, k48K), "2048 threads per block exceed 1024");
  EXPECT_EQ(launch_problem(dim3(1), dim3(1, 1, 65), 0, k48K), "blockDim.z = 65 exceeds 64");
  EXPECT_EQ(launch_problem(dim3(1, 65536), dim3(32), 0, k48K), "gridDim.y = 65536 exceeds 65535");
  EXPECT_EQ(launch_problem(dim3(0x80000000u), dim3(32), 0, k48K), "gridDim.x = 2147483648 exceeds 2147483647");
  EXPECT_EQ(launch_problem(dim3(0), dim3(32), 0, k48K), "gridDim.x is 0");
  EXPECT_EQ(launch_problem(dim3(1), dim3(32, 0), 0, k48K), "blockDim.y is 0");
  EXPECT_THAT(launch_problem(dim3(1), dim3(32), k48K + 1, k48K),
              HasSubstr("49153 bytes of dynamic shared memory exceed 49152"));
  EXPECT_THAT(launch_problem(dim3(1), dim3(32), 228 * 1024, 300 * 1024),
              HasSubstr("233472 bytes of dynamic shared memory exceed 232448"));
}

TEST(LaunchLimits, KernelNameIsTheFirstArgumentOfTheLaunchText) {
  using dp::kernels::cuda::launch_kernel_name;
  EXPECT_EQ(launch_kernel_name("relu_kernel<float>, grid_1d(n), kThreads, 0, stream"), "relu_kernel<float>");
  EXPECT_EQ(launch_kernel_name("augment_kernel<In, To, true>, dim3(a, b), 256, 0, s"), "augment_kernel<In, To, true>");
  EXPECT_EQ(launch_kernel_name("k<std::pair<int, int>>, 1, 1, 0, s"), "k<std::pair<int, int>>");
}

__global__ void mark_kernel(int* out) { out[threadIdx.x] = 7; }

// A launch with a bad shape does not run, and reports cudaErrorInvalidConfiguration once.
void expect_refused(dim3 grid, dim3 block, size_t shared) {
  DeviceArray<int> out(std::vector<int>(4, 0));
  DP_LAUNCH(mark_kernel, grid, block, shared, cudaStream_t{})(out.get());
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(out.download(), (std::vector<int>{0, 0, 0, 0})) << "the refused kernel ran";
}

TEST(LaunchLimits, LaunchBeyondALimitFailsWithInvalidConfiguration) {
  expect_refused(dim3(1), dim3(1025), 0);
  expect_refused(dim3(1), dim3(2, 2, 65), 0);
  expect_refused(dim3(1, 70000), dim3(4), 0);
  expect_refused(dim3(0), dim3(4), 0);
  expect_refused(dim3(1), dim3(4), k48K + 4);  // dynamic shared memory past 48 KiB, no opt-in
}

__global__ void big_dynamic_kernel(int* out, int n) {
  DP_DYNAMIC_SHARED(int, buf);
  for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = i;
  __syncthreads();
  if (threadIdx.x == 0) out[0] = buf[n - 1];
}

TEST(LaunchLimits, DynamicSharedMemoryAbove48KiBNeedsTheOptIn) {
  const int n = 100 * 1024 / 4;  // 100 KiB of ints
  DeviceArray<int> out(1);
  DP_LAUNCH(big_dynamic_kernel, 1, 128, n * sizeof(int), cudaStream_t{})(out.get(), n);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  ASSERT_EQ(cudaFuncSetAttribute(big_dynamic_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, n * 4), cudaSuccess);
  DP_LAUNCH(big_dynamic_kernel, 1, 128, n * sizeof(int), cudaStream_t{})(out.get(), n);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(out.download()[0], n - 1);
  EXPECT_EQ(cudaFuncSetAttribute(big_dynamic_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 228 * 1024),
            cudaErrorInvalidValue);  // past the sm_90 opt-in maximum (227 KiB)
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
}

TEST(LaunchLimits, LaunchOnADestroyedStreamFails) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  DeviceArray<int> out(std::vector<int>(4, 0));
  DP_LAUNCH(mark_kernel, 1, 4, 0, s)(out.get());
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(out.download(), (std::vector<int>{0, 0, 0, 0}));
}

}  // namespace
}  // namespace dp::emu::test
