#include "kernels/cuda/emu/errors.h"

#include <cstdio>

namespace dp::emu {
namespace {

struct ErrorState {
  cudaError_t last = cudaSuccess;
  bool fault_pending = false;
  std::string fault_message;
  std::string fault_string;  // cudaGetErrorString's text for the fault: stable until the next fault
};

ErrorState& state() {
  thread_local ErrorState s;
  return s;
}

}  // namespace

cudaError_t api_error(cudaError_t e, const char* call, const std::string& why) {
  state().last = e;
  std::fprintf(stderr, "dp cuda emu: %s: %s (%s)\n", call, why.c_str(), cudaGetErrorName(e));
  return e;
}

void record_fault(const std::string& message) {
  ErrorState& s = state();
  s.last = cudaErrorLaunchFailure;
  s.fault_pending = true;
  s.fault_message = message;
  s.fault_string = "unspecified launch failure: " + message;
  std::fprintf(stderr, "dp cuda emu: kernel fault: %s\n", message.c_str());
}

cudaError_t take_pending_fault() {
  ErrorState& s = state();
  if (!s.fault_pending) return cudaSuccess;
  s.fault_pending = false;
  s.last = cudaSuccess;
  return cudaErrorLaunchFailure;
}

const std::string& last_fault_message() { return state().fault_message; }

}  // namespace dp::emu

cudaError_t cudaGetLastError() {
  auto& s = dp::emu::state();
  const cudaError_t e = s.last;
  s.last = cudaSuccess;
  s.fault_pending = false;
  return e;
}

cudaError_t cudaPeekAtLastError() { return dp::emu::state().last; }

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
#define DP_EMU_NAME(code) \
  case code:              \
    return #code;
    DP_EMU_NAME(cudaSuccess)
    DP_EMU_NAME(cudaErrorInvalidValue)
    DP_EMU_NAME(cudaErrorMemoryAllocation)
    DP_EMU_NAME(cudaErrorInitializationError)
    DP_EMU_NAME(cudaErrorCudartUnloading)
    DP_EMU_NAME(cudaErrorInvalidConfiguration)
    DP_EMU_NAME(cudaErrorInvalidDevicePointer)
    DP_EMU_NAME(cudaErrorInvalidMemcpyDirection)
    DP_EMU_NAME(cudaErrorInsufficientDriver)
    DP_EMU_NAME(cudaErrorInvalidDeviceFunction)
    DP_EMU_NAME(cudaErrorNoDevice)
    DP_EMU_NAME(cudaErrorInvalidDevice)
    DP_EMU_NAME(cudaErrorNoKernelImageForDevice)
    DP_EMU_NAME(cudaErrorUnsupportedPtxVersion)
    DP_EMU_NAME(cudaErrorInvalidResourceHandle)
    DP_EMU_NAME(cudaErrorNotReady)
    DP_EMU_NAME(cudaErrorIllegalAddress)
    DP_EMU_NAME(cudaErrorLaunchOutOfResources)
    DP_EMU_NAME(cudaErrorLaunchTimeout)
    DP_EMU_NAME(cudaErrorAssert)
    DP_EMU_NAME(cudaErrorHardwareStackError)
    DP_EMU_NAME(cudaErrorIllegalInstruction)
    DP_EMU_NAME(cudaErrorMisalignedAddress)
    DP_EMU_NAME(cudaErrorInvalidAddressSpace)
    DP_EMU_NAME(cudaErrorInvalidPc)
    DP_EMU_NAME(cudaErrorLaunchFailure)
    DP_EMU_NAME(cudaErrorNotSupported)
    DP_EMU_NAME(cudaErrorUnknown)
#undef DP_EMU_NAME
  }
  return "cudaErrorUnknown";
}

// CUDA's own strings, so that messages (and any test matching them) read the same in both builds.
const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorCudartUnloading: return "driver shutting down";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorInvalidDeviceFunction: return "invalid device function";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorNoKernelImageForDevice: return "no kernel image is available for execution on the device";
    case cudaErrorUnsupportedPtxVersion: return "the provided PTX was compiled with an unsupported toolchain.";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorLaunchTimeout: return "the launch timed out and was terminated";
    case cudaErrorAssert: return "device-side assert triggered";
    case cudaErrorHardwareStackError: return "hardware stack error";
    case cudaErrorIllegalInstruction: return "an illegal instruction was encountered";
    case cudaErrorMisalignedAddress: return "misaligned address";
    case cudaErrorInvalidAddressSpace: return "operation not supported on global/shared address space";
    case cudaErrorInvalidPc: return "invalid program counter";
    case cudaErrorLaunchFailure: {
      const std::string& s = dp::emu::state().fault_string;
      return s.empty() ? "unspecified launch failure" : s.c_str();
    }
    case cudaErrorNotSupported: return "operation not supported";
    case cudaErrorUnknown: return "unknown error";
  }
  return "unrecognized error code";
}
