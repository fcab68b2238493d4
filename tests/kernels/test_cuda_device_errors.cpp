// Device faults through the real allocation and check paths (runtime/cuda/buffers.cpp,
// runtime/device_memory_cuda.cpp, runtime/cuda/check_runtime.cpp), run on the GPU (skipped
// without one) and on the CUDA emulator (test_kernels_emu, whose device has 80 GiB): an
// allocation beyond the device is a DeviceOutOfMemory with the bytes asked, the device's free and
// total memory and what was allocated, and leaves no error behind; on the emulator also a kernel
// fault surfacing at a later synchronisation, which names the layer dispatched last.
#ifdef DPTRAIN_HAVE_CUDA
#include <cuda_runtime.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/gpu_test.h"
#include "runtime/cuda/buffers.h"
#include "runtime/cuda/check_runtime.h"
#include "runtime/cuda/stream.h"
#include "runtime/device_error.h"
#include "runtime/device_memory.h"
#include "runtime/last_dispatch.h"
#include "runtime/tensor.h"
#include "tests/kernels/cuda_test_util.h"

#ifdef DP_CUDA_EMU
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/shared_memory.cuh"
#endif

namespace dp::kernels::cuda::test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// More than the whole device: refused at once, whatever else is allocated.
size_t beyond_the_device() { return static_cast<size_t>(device_memory_info(Device::cuda(0)).total) + (size_t{1} << 30); }

DP_GPU_TEST(DeviceOomGpu, ABufferBeyondTheDeviceCarriesBytesAskedAndFreeAndTheProcessGoesOn) {
  dp::cuda::CudaStream stream(0);
  const MemoryInfo before = device_memory_info(Device::cuda(0));
  ASSERT_GT(before.total, 0u);
  const size_t n = beyond_the_device();
  try {
    dp::cuda::DeviceBuffer b(n, stream.get());
    FAIL() << "allocated " << n << " bytes";
  } catch (const DeviceOutOfMemory& e) {
    EXPECT_EQ(e.info().device, "cuda:0");
    EXPECT_EQ(e.info().asked, n);
    EXPECT_EQ(e.info().total, before.total);
    EXPECT_GT(e.info().free, 0u);
    EXPECT_LE(e.info().free, before.total);
    EXPECT_THAT(e.info().call, StartsWith("cudaMallocAsync("));
    EXPECT_THAT(e.info().source, HasSubstr("runtime/cuda/buffers.cpp:"));
    EXPECT_THAT(e.what(), StartsWith("device out of memory on cuda:0 [" + identity_string() + "]: " +
                                     format_bytes(n) + " asked, " + format_bytes(e.info().free) + " free of " +
                                     format_bytes(before.total) + " (cudaMallocAsync("));
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // not left for the next launch check to report
  dp::cuda::DeviceBuffer ok(1 << 20, stream.get());
  CHECK_CUDA(cudaMemsetAsync(ok.data(), 0, ok.bytes(), stream.get()));
  stream.synchronize();
}

DP_GPU_TEST(DeviceOomGpu, ATensorBeyondTheDeviceNamesItsShapeAndDtype) {
  const int64_t elems = static_cast<int64_t>(beyond_the_device() / 2);
  try {
    Tensor::zeros({2, elems / 2}, DType::BF16, Device::cuda(0));
    FAIL();
  } catch (const DeviceOutOfMemory& e) {
    EXPECT_EQ(e.info().allocation, fmt::format("a [2, {}] bf16 tensor", elems / 2));
    EXPECT_EQ(e.info().asked, static_cast<uint64_t>(elems / 2) * 4);
    EXPECT_THAT(e.info().source, HasSubstr("runtime/device_memory_cuda.cpp:"));
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(Tensor::zeros({4}, DType::F32, Device::cuda(0)).nbytes(), 16u);
}

#ifdef DP_CUDA_EMU
// Thread 31 reads part[32]: the emulator stops the kernel and reports the fault at the next
// synchronising call, as a GPU reports an illegal address.
__global__ void overrun_kernel(float* out) {
  DP_SHARED(float, part, [32]);
  part[threadIdx.x] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = part[threadIdx.x + 1];
}

TEST(AsyncFaultGpu, AFaultSurfacingAtALaterSyncNamesTheLastLayerDispatched) {
  dp::cuda::CudaStream stream(0);
  dp::cuda::DeviceBuffer out(32 * sizeof(float), stream.get());
  note_dispatch("layer2.1.conv2", "conv2d", "backward");
  DP_LAUNCH(overrun_kernel, 1, 32, 0, stream.get())(out.as<float>());
  try {
    CHECK_CUDA(cudaStreamSynchronize(stream.get()));  // e.g. the loss's read-back, after the layers
    FAIL() << "the fault was not reported";
  } catch (const DeviceOutOfMemory&) {
    FAIL() << "a fault is not an out-of-memory";
  } catch (const DpError& e) {
    EXPECT_THAT(e.what(), StartsWith("CUDA error: cudaStreamSynchronize(stream.get()) at "));
    EXPECT_THAT(e.what(), HasSubstr("shared array 'part' index 32 is out of range"));
    EXPECT_THAT(e.what(), HasSubstr("; hint: " + async_fault_hint("layer 'layer2.1.conv2' (conv2d), backward")));
  }
}
#endif

}  // namespace
}  // namespace dp::kernels::cuda::test
#endif
