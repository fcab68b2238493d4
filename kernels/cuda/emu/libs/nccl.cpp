// The emulated NCCL's error strings (kernels/cuda/emu/include/nccl.h): no communication is emulated.
#include <nccl.h>

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "success";
    case ncclUnhandledCudaError: return "a CUDA call inside NCCL failed";
    case ncclSystemError: return "a system call inside NCCL failed";
    case ncclInternalError: return "NCCL internal error";
    case ncclInvalidArgument: return "an argument is invalid";
    case ncclInvalidUsage: return "NCCL is used wrongly";
    case ncclRemoteError: return "a peer failed or the network did";
    case ncclInProgress: return "in progress";
    default: return "an unknown result";
  }
}
