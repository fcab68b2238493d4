// The CUDA owners (runtime/cuda/): ordering, moves, handle binding, the memory pool's peak.
// Everything that needs a device (CudaResourcesGpu) skips without one; the error path is tested
// everywhere.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/device_memory.h"
#include "base/error.h"

#ifdef DPTRAIN_HAVE_CUDA
#include <cstring>
#include <vector>

#include "runtime/cuda/buffers.h"
#include "runtime/cuda/handles.h"
#include "runtime/cuda/memory_pool.h"
#include "runtime/cuda/stream.h"
#include "runtime/cuda/check.h"
#include "tests/gpu_test.h"
#endif

namespace dp::cuda {
namespace {

using ::testing::HasSubstr;

#ifdef DPTRAIN_HAVE_CUDA
TEST(CudaResources, AFailedCreateNamesTheCallTheSourceLineAndTheRank) {
  // Without a GPU, device 0 fails (no driver); with one, an index far beyond any machine's.
  const int bad = cuda_device_count() == 0 ? 0 : 4096;
  try {
    CudaStream s(bad);
    FAIL() << "expected DpError";
  } catch (const DpError& e) {
    EXPECT_THAT(e.what(), HasSubstr("CUDA error: cudaSetDevice(device) at "));
    EXPECT_THAT(e.what(), HasSubstr("runtime/cuda/stream.cpp:"));
    EXPECT_THAT(e.what(), HasSubstr("[" + identity_string() + "]"));
  }
}

DP_GPU_TEST(CudaResourcesGpu, StreamOrdersAMemsetAndTwoCopiesThroughPinnedMemory) {
  CudaStream stream(0);
  configure_memory_pool(0);
  constexpr size_t kBytes = 1 << 20;
  DeviceBuffer dev(kBytes, stream.get());
  PinnedBuffer host(kBytes);
  ASSERT_NE(dev.data(), nullptr);
  ASSERT_NE(host.data(), nullptr);
  std::memset(host.data(), 0x11, kBytes);
  CHECK_CUDA(cudaMemsetAsync(dev.data(), 0x5A, kBytes / 2, stream.get()));
  CHECK_CUDA(cudaMemcpyAsync(dev.as<char>() + kBytes / 2, host.data(), kBytes / 2, cudaMemcpyHostToDevice,
                             stream.get()));
  CHECK_CUDA(cudaMemcpyAsync(host.data(), dev.data(), kBytes, cudaMemcpyDeviceToHost, stream.get()));
  CudaEvent done(false);
  done.record(stream.get());
  done.synchronize();
  EXPECT_TRUE(done.done());
  const auto* b = host.as<unsigned char>();
  EXPECT_EQ(b[0], 0x5A);
  EXPECT_EQ(b[kBytes / 2 - 1], 0x5A);
  EXPECT_EQ(b[kBytes / 2], 0x11);
  EXPECT_EQ(b[kBytes - 1], 0x11);
}

DP_GPU_TEST(CudaResourcesGpu, AnotherStreamWaitsOnAnEvent) {
  CudaStream producer(0), consumer(0);
  DeviceBuffer a(4096, producer.get()), b(4096, producer.get());
  CHECK_CUDA(cudaMemsetAsync(a.data(), 0x33, 4096, producer.get()));
  CudaEvent ready(false);
  ready.record(producer.get());
  consumer.wait(ready);
  CHECK_CUDA(cudaMemcpyAsync(b.data(), a.data(), 4096, cudaMemcpyDeviceToDevice, consumer.get()));
  std::vector<unsigned char> out(4096);
  CHECK_CUDA(cudaMemcpyAsync(out.data(), b.data(), 4096, cudaMemcpyDeviceToHost, consumer.get()));
  consumer.synchronize();
  EXPECT_EQ(out[0], 0x33);
  EXPECT_EQ(out[4095], 0x33);
  CudaEvent back(false);  // the buffers are freed on the producer: it waits for the consumer first
  back.record(consumer.get());
  producer.wait(back);
}

DP_GPU_TEST(CudaResourcesGpu, MovesLeaveEmptyOwnersAndTransferTheHandle) {
  CudaStream s1(0);
  cudaStream_t raw = s1.get();
  CudaStream s2(std::move(s1));
  EXPECT_FALSE(s1);
  EXPECT_EQ(s2.get(), raw);
  EXPECT_EQ(s2.device(), 0);
  CudaStream s3(0);
  s3 = std::move(s2);  // s3's own stream is destroyed, s2's moves in
  EXPECT_EQ(s3.get(), raw);
  EXPECT_FALSE(s2);

  CudaEvent e1(true);
  CudaEvent e2 = std::move(e1);
  EXPECT_FALSE(e1);
  EXPECT_TRUE(e2);

  DeviceBuffer d1(256, s3.get());
  void* p = d1.data();
  DeviceBuffer d2;
  d2 = std::move(d1);
  EXPECT_EQ(d1.data(), nullptr);
  EXPECT_EQ(d1.bytes(), 0u);
  EXPECT_EQ(d2.data(), p);
  EXPECT_EQ(d2.bytes(), 256u);
  EXPECT_EQ(d2.stream(), s3.get());

  PinnedBuffer h1(64);
  PinnedBuffer h2(std::move(h1));
  EXPECT_EQ(h1.data(), nullptr);
  EXPECT_EQ(h2.bytes(), 64u);

  CublasLtHandle l1 = CublasLtHandle::create();
  CublasLtHandle l2(std::move(l1));
  EXPECT_FALSE(l1);
  EXPECT_TRUE(l2);
  s3.synchronize();
}

DP_GPU_TEST(CudaResourcesGpu, LibraryHandlesAreBoundToTheirStream) {
  CudaStream s(0), t(0);
  CublasHandle blas(s.get());
  cudaStream_t got = nullptr;
  CHECK_CUBLAS(cublasGetStream(blas.get(), &got));
  EXPECT_EQ(got, s.get());
  blas.set_stream(t.get());
  CHECK_CUBLAS(cublasGetStream(blas.get(), &got));
  EXPECT_EQ(got, t.get());

  CudnnHandle dnn(s.get());
  got = nullptr;
  CHECK_CUDNN(cudnnGetStream(dnn.get(), &got));
  EXPECT_EQ(got, s.get());
  CudnnHandle moved(std::move(dnn));
  EXPECT_FALSE(dnn);
  EXPECT_TRUE(moved);
}

DP_GPU_TEST(CudaResourcesGpu, TimingEventsMeasureANonNegativeInterval) {
  CudaStream s(0);
  CudaEvent start(true), stop(true);
  DeviceBuffer buf(1 << 24, s.get());
  start.record(s.get());
  CHECK_CUDA(cudaMemsetAsync(buf.data(), 0, buf.bytes(), s.get()));
  stop.record(s.get());
  stop.synchronize();
  EXPECT_GE(stop.elapsed_ms_since(start), 0.0f);
}

DP_GPU_TEST(CudaResourcesGpu, PoolPeakCountsALiveAllocationAndSurvivesItsFree) {
  CudaStream s(0);
  configure_memory_pool(0);
  s.synchronize();
  reset_memory_pool_peak(0);
  const MemoryPoolStats before = memory_pool_stats(0);
  constexpr uint64_t kBytes = 64ull << 20;
  {
    DeviceBuffer big(kBytes, s.get());
    s.synchronize();
    const MemoryPoolStats live = memory_pool_stats(0);
    EXPECT_GE(live.used_bytes, before.used_bytes + kBytes);
    EXPECT_GE(live.used_high_bytes, before.used_bytes + kBytes);
    EXPECT_GE(live.reserved_bytes, live.used_bytes);
  }
  s.synchronize();
  const MemoryPoolStats after = memory_pool_stats(0);
  EXPECT_EQ(after.used_bytes, before.used_bytes);
  EXPECT_GE(after.used_high_bytes, before.used_bytes + kBytes);  // the peak stays
  EXPECT_GE(after.reserved_bytes, kBytes);  // release threshold: the pool kept the memory
  reset_memory_pool_peak(0);
  EXPECT_LT(memory_pool_stats(0).used_high_bytes, before.used_bytes + kBytes);
}
#else
TEST(CudaResources, NeedACudaBuild) { GTEST_SKIP() << "built without CUDA"; }
#endif

}  // namespace
}  // namespace dp::cuda
