// defines: the emulation build's stand-in for <nccl.h>, as far as the emulated sources use it:
// ncclResult_t (NCCL 2's values) and ncclGetErrorString (kernels/cuda/emu/libs/nccl.cpp). No
// NCCL communication is emulated.
#pragma once

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8,
} ncclResult_t;

const char* ncclGetErrorString(ncclResult_t result);
