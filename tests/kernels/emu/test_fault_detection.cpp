// The emulator finds what a GPU run (or compute-sanitizer) would, each as a clear fault that
// fails the launch instead of a hang: an off-by-one global write (an ASan report), a missing
// __syncthreads in a shared-memory reduction (racecheck), a divergent barrier (deadlock), a wrong
// shuffle mask, a shared index out of range.
#include <cuda_runtime.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/cuda/emu/options.h"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/shared_memory.cuh"
#include "tests/kernels/emu/block_sum_kernel.h"
#include "tests/kernels/emu/emu_test_util.h"

namespace dp::emu::test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr int kThreads = 256;

// --- An off-by-one index: ASan reports the write one element past the buffer. ---

__global__ void off_by_one_kernel(float* y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i <= n; i += gridDim.x * blockDim.x) y[i] = 1.0f;  // <= : the bug
}

void run_off_by_one() {
  float* y = nullptr;
  cudaMalloc(&y, 1000 * sizeof(float));
  DP_LAUNCH(off_by_one_kernel, 4, kThreads, 0, cudaStream_t{})(y, 1000);
  cudaFree(y);
}

TEST(EmuFaultDeathTest, OffByOneWriteIsAnAddressSanitizerReport) {
#if !defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "built without AddressSanitizer (DPTRAIN_EMU_SANITIZE=OFF)";
#endif
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // The report names the access (a 4-byte write right after a 4000-byte device allocation) and
  // the kernel in its stack.
  EXPECT_DEATH(run_off_by_one(), "heap-buffer-overflow(.|\n)*WRITE of size 4(.|\n)*off_by_one_kernel(.|\n)*"
                                 "0 bytes to the right of 4000-byte region");
}

// --- A missing __syncthreads in a shared-memory reduction: racecheck names the race. ---

__global__ void racy_sum_kernel(float* out, const float* x) {
  DP_SHARED(float, part, [kThreads]);
  const unsigned t = threadIdx.x;
  part[t] = x[blockIdx.x * kThreads + t];
  __syncthreads();
  for (unsigned w = kThreads / 2; w > 0; w >>= 1)
    if (t < w) part[t] += part[t + w];  // the bug: no __syncthreads() after each level
  if (t == 0) out[blockIdx.x] = part[0];
}

class RacecheckOn : public ::testing::Test {
 protected:
  void SetUp() override { set_racecheck(true); }
  void TearDown() override { set_racecheck(false); }
};

TEST_F(RacecheckOn, MissingSyncthreadsInReductionIsARace) {
  DeviceArray<float> x(std::vector<float>(2 * kThreads, 1.0f)), out(2);
  DP_LAUNCH(racy_sum_kernel, 2, kThreads, 0, cudaStream_t{})(out.get(), x.get());
  const LaunchResult r = last_launch();
  EXPECT_EQ(r.status, cudaErrorLaunchFailure);
  // Thread 0 runs its whole loop first, down to its last level where it reads part[1]; thread 1
  // then writes part[1] at the first level with no barrier between: a write-after-read hazard.
  EXPECT_THAT(r.message, AllOf(HasSubstr("kernel racy_sum_kernel (launched at test_fault_detection.cpp:"),
                               HasSubstr("block (0,0,0), thread (1,0,0)"),
                               HasSubstr("shared-memory race (write-after-read hazard) on part[1]"),
                               HasSubstr("thread (0,0,0) read it")));
}

// The same kernel with its barriers (block_sum_kernel) passes racecheck: no false alarm.
TEST_F(RacecheckOn, ReductionWithBarriersIsClean) {
  DeviceArray<float> x(std::vector<float>(2 * kThreads, 1.0f)), out(2);
  DP_LAUNCH(block_sum_kernel<float>, 2, kThreads, 0, cudaStream_t{})(out.get(), x.get());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(out.download(), (std::vector<float>{256.0f, 256.0f}));
}

// Within a warp, __syncwarp orders shared accesses; without it lanes race.
template <bool kSyncWarp>
__global__ void warp_exchange_kernel(int* out) {
  DP_SHARED(int, slot, [32]);
  const unsigned lane = threadIdx.x;
  slot[lane] = int(lane);
  if (kSyncWarp) __syncwarp();
  out[lane] = slot[31 - lane];
}

TEST_F(RacecheckOn, SyncwarpOrdersLanesOfAWarp) {
  DeviceArray<int> out(32);
  DP_LAUNCH(warp_exchange_kernel<true>, 1, 32, 0, cudaStream_t{})(out.get());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(out.download()[0], 31);
  DP_LAUNCH(warp_exchange_kernel<false>, 1, 32, 0, cudaStream_t{})(out.get());
  const LaunchResult r = last_launch();
  EXPECT_EQ(r.status, cudaErrorLaunchFailure);
  // Lane 0 runs first and reads slot[31] before lane 31 has written it.
  EXPECT_THAT(r.message, AllOf(HasSubstr("thread (0,0,0)"), HasSubstr("reads shared slot[31]"),
                               HasSubstr("before any thread of the block wrote it")));
}

// --- A barrier not reached by every thread: a deadlock, reported with kernel, block, threads. ---

__global__ void early_exit_kernel(int* out) {
  if (threadIdx.x >= 128) return;  // the bug: these threads never reach the barrier
  out[threadIdx.x] = 1;
  __syncthreads();
}

TEST(EmuFault, BarrierAfterEarlyExitIsADeadlock) {
  DeviceArray<int> out(kThreads);
  DP_LAUNCH(early_exit_kernel, 3, kThreads, 0, cudaStream_t{})(out.get());
  const LaunchResult r = last_launch();
  EXPECT_EQ(r.status, cudaErrorLaunchFailure);
  EXPECT_THAT(r.message, AllOf(HasSubstr("kernel early_exit_kernel (launched at"), HasSubstr("block (0,0,0): deadlock"),
                               HasSubstr("128 threads wait at __syncthreads at test_fault_detection.cpp:"),
                               HasSubstr("(first: thread (0,0,0))"),
                               HasSubstr("128 threads exited (first: thread (128,0,0))")));
}

__global__ void divergent_barrier_kernel(int* out) {
  if (threadIdx.x % 64 < 32) {
    out[threadIdx.x] = 1;
    __syncthreads();
  } else {
    out[threadIdx.x] = 2;
    __syncthreads();  // a different barrier: undefined on a GPU
  }
}

TEST(EmuFault, DifferentBarriersInDivergentBranchesAreReported) {
  DeviceArray<int> out(kThreads);
  DP_LAUNCH(divergent_barrier_kernel, 1, kThreads, 0, cudaStream_t{})(out.get());
  const LaunchResult r = last_launch();
  EXPECT_EQ(r.status, cudaErrorLaunchFailure);
  EXPECT_THAT(r.message, AllOf(HasSubstr("kernel divergent_barrier_kernel"), HasSubstr("block (0,0,0): divergent __syncthreads"),
                               HasSubstr("128 threads wait at __syncthreads"), HasSubstr("(first: thread (0,0,0))"),
                               HasSubstr("(first: thread (32,0,0))")));
}

// --- Wrong shuffle masks. ---

// Lanes 16..31 skip the shuffle their mask names them in.
__global__ void half_warp_shuffle_kernel(int* out) {
  int v = int(threadIdx.x);
  if (threadIdx.x % 32 < 16) v += __shfl_down_sync(0xFFFFFFFFu, v, 8);
  out[threadIdx.x] = v;
}

TEST(EmuFault, ShuffleMaskNamingALaneThatNeverArrivesIsReported) {
  DeviceArray<int> out(64);
  DP_LAUNCH(half_warp_shuffle_kernel, 1, 64, 0, cudaStream_t{})(out.get());
  const LaunchResult r = last_launch();
  EXPECT_EQ(r.status, cudaErrorLaunchFailure);
  EXPECT_THAT(r.message, AllOf(HasSubstr("kernel half_warp_shuffle_kernel"), HasSubstr("thread (16,0,0)"),
                               HasSubstr("exited while lane 0 (thread (0,0,0)) waits for it in "
                                         "__shfl_down_sync(mask 0xffffffff)")));
}

// A full mask in a block of 48 threads: the second warp has 16 lanes.
__global__ void partial_warp_kernel(unsigned* out) { out[threadIdx.x] = __ballot_sync(0xFFFFFFFFu, 1); }

TEST(EmuFault, FullMaskInAPartialWarpIsReported) {
  DeviceArray<unsigned> out(48);
  DP_LAUNCH(partial_warp_kernel, 1, 48, 0, cudaStream_t{})(out.get());
  const LaunchResult r = last_launch();
  EXPECT_EQ(r.status, cudaErrorLaunchFailure);
  EXPECT_THAT(r.message, AllOf(HasSubstr("thread (32,0,0)"),
                               HasSubstr("__ballot_sync(mask 0xffffffff) names lane 16, which does not exist")));
}

// Lanes 0..15 name only themselves but read lanes 16..31.
__global__ void read_outside_mask_kernel(float* out) {
  const float v = float(threadIdx.x);
  if (threadIdx.x < 16) out[threadIdx.x] = __shfl_xor_sync(0x0000FFFFu, v, 16);
}

TEST(EmuFault, ShuffleReadingALaneOutsideItsMaskIsReported) {
  DeviceArray<float> out(32);
  DP_LAUNCH(read_outside_mask_kernel, 1, 32, 0, cudaStream_t{})(out.get());
  const LaunchResult r = last_launch();
  EXPECT_EQ(r.status, cudaErrorLaunchFailure);
  EXPECT_THAT(r.message, HasSubstr("__shfl_xor_sync(mask 0x0000ffff): lane 0 reads lane 16, which the mask does "
                                   "not name"));
}

__global__ void mask_without_caller_kernel(int* out) {
  out[threadIdx.x] = __shfl_sync(0x1u, int(threadIdx.x), 0);  // lanes 1..31 are not in their own mask
}

TEST(EmuFault, MaskWithoutTheCallingLaneIsReported) {
  DeviceArray<int> out(32);
  DP_LAUNCH(mask_without_caller_kernel, 1, 32, 0, cudaStream_t{})(out.get());
  const LaunchResult r = last_launch();
  EXPECT_EQ(r.status, cudaErrorLaunchFailure);
  EXPECT_THAT(r.message, AllOf(HasSubstr("thread (1,0,0)"),
                               HasSubstr("__shfl_sync(mask 0x00000001) called by lane 1, which its mask does not name")));
}

// --- Shared index out of range (memcheck's job on a GPU). ---

__global__ void shared_overrun_kernel(float* out) {
  DP_SHARED(float, part, [kThreads]);
  part[threadIdx.x] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = part[threadIdx.x + 1];  // the bug: thread 255 reads part[256]
}

TEST(EmuFault, SharedIndexOutOfRangeIsReported) {
  DeviceArray<float> out(kThreads);
  DP_LAUNCH(shared_overrun_kernel, 1, kThreads, 0, cudaStream_t{})(out.get());
  const LaunchResult r = last_launch();
  EXPECT_EQ(r.status, cudaErrorLaunchFailure);
  EXPECT_THAT(r.message, AllOf(HasSubstr("thread (255,0,0)"),
                               HasSubstr("shared array 'part' index 256 is out of range [0, 256)")));
}

// --- After a fault: the error reads once, names the fault, and the next launch runs clean. ---

TEST(EmuFault, FaultIsReportedOnceThenTheNextLaunchRuns) {
  DeviceArray<int> out(kThreads);
  DP_LAUNCH(early_exit_kernel, 1, kThreads, 0, cudaStream_t{})(out.get());
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorLaunchFailure);
  EXPECT_THAT(cudaGetErrorString(cudaErrorLaunchFailure), HasSubstr("unspecified launch failure: kernel early_exit_kernel"));
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);  // the synchronising call reports it...
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);                   // ...and only once
  // The fibers of the abandoned block are gone; a correct kernel runs on the same stacks.
  DeviceArray<float> x(std::vector<float>(kThreads, 2.0f)), sum(1);
  DP_LAUNCH(block_sum_kernel<float>, 1, kThreads, 0, cudaStream_t{})(sum.get(), x.get());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(sum.download()[0], 512.0f);
}

}  // namespace
}  // namespace dp::emu::test
