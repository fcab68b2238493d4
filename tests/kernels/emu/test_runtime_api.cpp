// The emulation build's runtime calls: host-memory allocations with CUDA's checks, synchronous
// streams and events, one sm_90 device, and CUDA's last-error rules.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/emu/memory.h"

namespace dp::emu::test {
namespace {

TEST(EmuMemory, DeviceMemoryIsAlignedPoisonedAndCounted) {
  const size_t before = device_bytes_in_use();
  void* p = nullptr;
  ASSERT_EQ(cudaMallocAsync(&p, 1000, cudaStreamPerThread), cudaSuccess);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);
  EXPECT_EQ(device_bytes_in_use(), before + 1000);
  std::vector<unsigned char> host(1000);
  ASSERT_EQ(cudaMemcpy(host.data(), p, 1000, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(host, std::vector<unsigned char>(1000, 0xFF));  // fresh memory is not zero
  ASSERT_EQ(cudaMemsetAsync(p, 0, 1000, cudaStreamPerThread), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(host.data(), p, 1000, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(host, std::vector<unsigned char>(1000, 0));
  ASSERT_EQ(cudaFreeAsync(p, cudaStreamPerThread), cudaSuccess);
  EXPECT_EQ(device_bytes_in_use(), before);
}

TEST(EmuMemory, CopiesAndMemsetsMustStayInsideTheirDeviceAllocation) {
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 16 * sizeof(float)), cudaSuccess);
  std::vector<float> host(17, 1.0f);
  EXPECT_EQ(cudaMemcpy(d, host.data(), 17 * sizeof(float), cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);  // a refused call is also the last error
  EXPECT_EQ(cudaMemcpy(host.data(), d + 1, 16 * sizeof(float), cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(host.data(), host.data() + 1, 4, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset(d + 8, 0, 9 * sizeof(float)), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(d + 8, host.data(), 8 * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d, d + 8, 8 * sizeof(float), cudaMemcpyDeviceToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d, host.data(), 4, static_cast<cudaMemcpyKind>(7)), cudaErrorInvalidMemcpyDirection);
  (void)cudaGetLastError();
  ASSERT_EQ(cudaFree(d), cudaSuccess);
}

TEST(EmuMemory, FreeingWhatIsNotAnAllocationFails) {
  char* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 64), cudaSuccess);
  EXPECT_EQ(cudaFree(d + 8), cudaErrorInvalidValue);  // not the start
  EXPECT_EQ(cudaFreeHost(d), cudaErrorInvalidValue);  // device memory freed as pinned
  ASSERT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cudaFree(d), cudaErrorInvalidValue);  // twice
  EXPECT_EQ(cudaFree(nullptr), cudaSuccess);
  void* pinned = nullptr;
  ASSERT_EQ(cudaHostAlloc(&pinned, 32, cudaHostAllocPortable), cudaSuccess);
  EXPECT_EQ(cudaFree(pinned), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
  (void)cudaGetLastError();
}

TEST(EmuMemory, DefaultPoolReportsUsedBytesAndHighWater) {
  cudaMemPool_t pool;
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
  uint64_t zero = 0, used = 0, high = 0;
  ASSERT_EQ(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero), cudaSuccess);
  const size_t base = device_bytes_in_use();
  void* p = nullptr;
  ASSERT_EQ(cudaMallocAsync(&p, 4096, 0), cudaSuccess);
  ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used), cudaSuccess);
  EXPECT_EQ(used, base + 4096);
  ASSERT_EQ(cudaFreeAsync(p, 0), cudaSuccess);
  ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &high), cudaSuccess);
  EXPECT_EQ(high, base + 4096);
}

// The reserve keeps freed memory up to the release threshold: all of it at UINT64_MAX (what
// runtime/cuda/memory_pool.cpp configures), none at 0.
TEST(EmuMemory, DefaultPoolReserveKeepsFreedMemoryUpToTheReleaseThreshold) {
  cudaMemPool_t pool;
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
  uint64_t threshold = UINT64_MAX, reserved = 0, zero = 0;
  const size_t base = device_bytes_in_use();
  ASSERT_EQ(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold), cudaSuccess);
  void* p = nullptr;
  ASSERT_EQ(cudaMallocAsync(&p, 1 << 20, 0), cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(p, 0), cudaSuccess);
  ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved), cudaSuccess);
  EXPECT_GE(reserved, base + (1 << 20));
  ASSERT_EQ(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &zero), cudaSuccess);
  ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved), cudaSuccess);
  EXPECT_EQ(reserved, base);  // trimmed to what is in use
}

TEST(EmuStreams, HandlesAreCheckedAndWorkIsDoneAtEnqueue) {
  cudaStream_t s;
  int least = 1, greatest = 1;
  ASSERT_EQ(cudaDeviceGetStreamPriorityRange(&least, &greatest), cudaSuccess);
  EXPECT_EQ(least, 0);
  EXPECT_EQ(greatest, -5);
  ASSERT_EQ(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest), cudaSuccess);
  int called = 0;
  ASSERT_EQ(cudaLaunchHostFunc(s, [](void* p) { ++*static_cast<int*>(p); }, &called), cudaSuccess);
  EXPECT_EQ(called, 1);  // synchronous: done when the call returns
  EXPECT_EQ(cudaStreamQuery(s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamDestroy(s), cudaErrorInvalidResourceHandle);
  (void)cudaGetLastError();
}

TEST(EmuStreams, EventsRecordHostTimeAndCheckTheirFlags) {
  cudaEvent_t a, b, untimed;
  ASSERT_EQ(cudaEventCreate(&a), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&b), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming), cudaSuccess);
  float ms = -1;
  EXPECT_EQ(cudaEventElapsedTime(&ms, a, b), cudaErrorInvalidResourceHandle);  // not recorded yet
  ASSERT_EQ(cudaEventRecord(a, cudaStreamPerThread), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(b, cudaStreamPerThread), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(untimed, cudaStreamPerThread), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(b), cudaSuccess);
  EXPECT_EQ(cudaEventSynchronize(b), cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent(cudaStreamPerThread, b, 0), cudaSuccess);
  ASSERT_EQ(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
  EXPECT_GE(ms, 0.0f);
  EXPECT_EQ(cudaEventElapsedTime(&ms, a, untimed), cudaErrorInvalidResourceHandle);
  for (cudaEvent_t e : {a, b, untimed}) ASSERT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(a), cudaErrorInvalidResourceHandle);
  (void)cudaGetLastError();
}

TEST(EmuDevice, OneSm90Device) {
  int n = 0, d = -1;
  ASSERT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
  EXPECT_EQ(n, 1);
  EXPECT_EQ(cudaSetDevice(0), cudaSuccess);
  EXPECT_EQ(cudaSetDevice(1), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
  ASSERT_EQ(cudaGetDevice(&d), cudaSuccess);
  EXPECT_EQ(d, 0);
  cudaDeviceProp p;
  ASSERT_EQ(cudaGetDeviceProperties(&p, 0), cudaSuccess);
  EXPECT_EQ(p.major * 10 + p.minor, 90);
  EXPECT_EQ(p.maxThreadsPerBlock, 1024);
  EXPECT_EQ(p.sharedMemPerBlockOptin, 227u * 1024);
  int v = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&v, cudaDevAttrMaxGridDimY, 0), cudaSuccess);
  EXPECT_EQ(v, 65535);
  char bus[32];
  ASSERT_EQ(cudaDeviceGetPCIBusId(bus, sizeof bus, 0), cudaSuccess);
  EXPECT_STREQ(bus, "0000:00:00.0");
}

TEST(EmuErrors, StringsAndNamesAreCudas) {
  EXPECT_STREQ(cudaGetErrorString(cudaErrorInvalidConfiguration), "invalid configuration argument");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory");
  EXPECT_STREQ(cudaGetErrorName(cudaErrorInvalidValue), "cudaErrorInvalidValue");
  EXPECT_EQ(static_cast<int>(cudaErrorLaunchFailure), 719);
}

}  // namespace
}  // namespace dp::emu::test
