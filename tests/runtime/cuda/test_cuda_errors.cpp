// CUDA's errors as the check macros report them (runtime/cuda/check_runtime.h, check.h): an
// allocation failure of the runtime, cuDNN or cuBLAS is a DeviceOutOfMemory; an asynchronous kernel
// fault says that it surfaced later than it happened and names the layer dispatched last. The
// workspace beyond a real device's memory (DeviceOomGpu, skipped without a GPU) says it is the
// workspace. The real allocation paths: tests/kernels/test_cuda_device_errors.cpp (GPU and
// emulator).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/gpu_test.h"
#include "base/error.h"
#include "runtime/device_memory.h"

#ifdef DPTRAIN_HAVE_CUDA
#include "runtime/cuda/check.h"
#include "runtime/cuda/exec_context.h"
#include "runtime/device_error.h"
#include "runtime/last_dispatch.h"
#endif

namespace dp::cuda {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

#ifdef DPTRAIN_HAVE_CUDA
TEST(CudaErrors, KernelFaultsAreTheAsynchronousOnes) {
  for (cudaError_t e : {cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorMisalignedAddress,
                        cudaErrorIllegalInstruction, cudaErrorAssert, cudaErrorHardwareStackError})
    EXPECT_TRUE(cuda_error_is_async_fault(e)) << cudaGetErrorName(e);
  for (cudaError_t e : {cudaSuccess, cudaErrorMemoryAllocation, cudaErrorInvalidValue, cudaErrorInvalidConfiguration,
                        cudaErrorNoDevice})
    EXPECT_FALSE(cuda_error_is_async_fault(e)) << cudaGetErrorName(e);
}

TEST(CudaErrors, AnAsynchronousFaultNamesTheLastLayerAndWhatToRunToFindIt) {
  EXPECT_EQ(async_fault_hint("layer 'conv3' (conv2d), backward"),
            "a kernel faulted; CUDA reports that at the next call that checks, so this call is where it surfaced, "
            "not where it happened: the faulting kernel is in the last layer dispatched on this thread, layer 'conv3' "
            "(conv2d), backward, or one enqueued before it; rerun with CUDA_LAUNCH_BLOCKING=1 (every launch then "
            "waits, and the error names the faulting layer) or under compute-sanitizer; the GPU context is unusable "
            "for the rest of this process");
  EXPECT_THAT(async_fault_hint(""), HasSubstr("the faulting kernel is one enqueued earlier (no layer was dispatched "
                                              "on this thread) or one enqueued before it"));
}

TEST(CudaErrors, CheckCudaOfAFaultCarriesTheHintWithTheLastDispatch) {
  note_dispatch("fc2", "linear", "forward");
  try {
    CHECK_CUDA(cudaErrorIllegalAddress);
    FAIL();
  } catch (const DpError& e) {
    EXPECT_THAT(e.what(), StartsWith("CUDA error: cudaErrorIllegalAddress at "));
    EXPECT_THAT(e.what(), HasSubstr("[" + identity_string() + "]: "));
    EXPECT_THAT(e.what(), HasSubstr("(700); hint: a kernel faulted; "));
    EXPECT_THAT(e.what(), HasSubstr("in the last layer dispatched on this thread, layer 'fc2' (linear), forward, or"));
  }
}

TEST(CudaErrors, OutOfMemoryFromAnyCallIsADeviceOutOfMemory) {
  try {
    CHECK_CUDA(cudaErrorMemoryAllocation);
    FAIL();
  } catch (const DeviceOutOfMemory& e) {
    EXPECT_EQ(e.info().call, "cudaErrorMemoryAllocation");
    EXPECT_EQ(e.info().asked, 0u);  // not an allocation call: the size is not known
    EXPECT_THAT(e.info().source, HasSubstr("test_cuda_errors.cpp:"));
    EXPECT_THAT(e.what(), HasSubstr(": an allocation of unknown size failed"));
  }
  try {
    CHECK_CUDA_ALLOC(cudaErrorMemoryAllocation, size_t{3} << 30);
    FAIL();
  } catch (const DeviceOutOfMemory& e) {
    EXPECT_EQ(e.info().asked, size_t{3} << 30);
    EXPECT_THAT(e.what(), HasSubstr(": 3.0 GiB (3221225472 bytes) asked"));
  }
  // Cleared: the next CHECK_LAUNCH does not report it again. (Without a driver every call reports
  // the missing driver, which nothing clears.)
  if (cuda_device_count() > 0) {
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  }
}

// cuDNN 9 answers "not supported" with sub-codes (3001 CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN ...
// 3014 _INVALID_DYNAMIC_SHAPE); comparing with 3000 alone made the batch-norm fallbacks throw. The
// sub-codes of a broken installation (3005-3009: driver, runtime, architecture, a missing
// prerequisite or sub-library) are errors, not a reason to fall back.
TEST(CudaErrors, EveryNotSupportedSubCodeIsNotSupported) {
  for (int code = 3000; code <= 3014; ++code)
    EXPECT_EQ(cudnn_status_is_not_supported(static_cast<cudnnStatus_t>(code)), code < 3005 || code > 3009) << code;
  EXPECT_TRUE(cudnn_status_is_not_supported(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE));
  EXPECT_FALSE(cudnn_status_is_not_supported(CUDNN_STATUS_SUCCESS));
  EXPECT_FALSE(cudnn_status_is_not_supported(CUDNN_STATUS_BAD_PARAM));                       // 2000
  EXPECT_FALSE(cudnn_status_is_not_supported(CUDNN_STATUS_INTERNAL_ERROR));                  // 4000
  EXPECT_FALSE(cudnn_status_is_not_supported(CUDNN_STATUS_EXECUTION_FAILED));                // 5000
  EXPECT_FALSE(cudnn_status_is_not_supported(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED));
}

TEST(CudaErrors, TheLibrariesAllocationFailuresAreDeviceOutOfMemory) {
  EXPECT_TRUE(cudnn_status_is_device_oom(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED));
  EXPECT_FALSE(cudnn_status_is_device_oom(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED));  // the host's
  EXPECT_FALSE(cudnn_status_is_device_oom(CUDNN_STATUS_NOT_SUPPORTED));
  EXPECT_TRUE(cublas_status_is_device_oom(CUBLAS_STATUS_ALLOC_FAILED));
  EXPECT_FALSE(cublas_status_is_device_oom(CUBLAS_STATUS_EXECUTION_FAILED));
  try {
    CHECK_CUDNN(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED);
    FAIL();
  } catch (const DeviceOutOfMemory& e) {
    EXPECT_THAT(e.info().call, StartsWith("CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED: "));
    EXPECT_THAT(e.info().call, HasSubstr("(4004)"));
  }
  EXPECT_THROW(CHECK_CUBLAS(CUBLAS_STATUS_ALLOC_FAILED), DeviceOutOfMemory);
  try {
    CHECK_CUDNN(CUDNN_STATUS_NOT_SUPPORTED);
    FAIL();
  } catch (const DeviceOutOfMemory&) {
    FAIL() << "not an allocation failure";
  } catch (const DpError& e) {
    EXPECT_THAT(e.what(), StartsWith("cuDNN error: CUDNN_STATUS_NOT_SUPPORTED at "));
  }
}

// More than the whole device: the runtime refuses it at once, whatever else is allocated.
size_t beyond_the_device() { return static_cast<size_t>(device_memory_info(Device::cuda(0)).total) + (size_t{1} << 30); }

DP_GPU_TEST(DeviceOomGpu, TheWorkspaceSaysSoAndNamesTrainWorkspaceMbFirst) {
  const size_t n = beyond_the_device();
  ExecContext exec(0, n);
  try {
    exec.workspace(n);
    FAIL();
  } catch (const DeviceOutOfMemory& e) {
    EXPECT_TRUE(e.info().workspace);
    EXPECT_EQ(e.info().allocation, fmt::format("the cuDNN/cuBLASLt workspace ({} bytes; train.workspace_mb allows {}, "
                                               "more only for the deterministic attention backward)",
                                               n, n));
    EXPECT_THAT(e.what(), HasSubstr("; lower train.workspace_mb (the scratch one cuDNN/cuBLASLt call may use) or "
                                    "train.batch_size"));
  }
  EXPECT_NE(exec.workspace(1 << 20), nullptr);
}

#endif

}  // namespace
}  // namespace dp::cuda
