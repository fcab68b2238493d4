// defines: the emulation build's stand-in for <cudnn.h>, as far as the emulated sources use it:
// the status codes (cuDNN 9's, with their sub-codes and CUDNN_STATUS_CATEGORY), the handle and
// cudnnCreate / cudnnDestroy / cudnnSetStream / cudnnGetStream / cudnnGetErrorString (kernels/cuda/emu/libs/
// cudnn.cpp). No cuDNN operation is emulated: a source that runs one is not built on the
// emulator. Written from the cuDNN 9 documentation with its numeric values.
#pragma once
#include <cuda_runtime_api.h>

typedef enum {
  CUDNN_STATUS_SUCCESS = 0,
  CUDNN_STATUS_NOT_INITIALIZED = 1001,
  CUDNN_STATUS_BAD_PARAM = 2000,
  CUDNN_STATUS_BAD_PARAM_NULL_POINTER = 2002,
  CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH = 2007,
  CUDNN_STATUS_NOT_SUPPORTED = 3000,
  CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN = 3001,
  CUDNN_STATUS_NOT_SUPPORTED_SHAPE = 3002,
  CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE = 3003,
  CUDNN_STATUS_NOT_SUPPORTED_LAYOUT = 3004,
  CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER = 3005,
  CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART = 3006,
  CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH = 3007,
  CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING = 3008,
  CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE = 3009,
  CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT = 3010,
  CUDNN_STATUS_NOT_SUPPORTED_PADDING = 3011,
  CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM = 3012,
  CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API = 3013,
  CUDNN_STATUS_NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE = 3014,
  CUDNN_STATUS_INTERNAL_ERROR = 4000,
  CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED = 4003,
  CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED = 4004,
  CUDNN_STATUS_EXECUTION_FAILED = 5000,
} cudnnStatus_t;

#define CUDNN_STATUS_CATEGORY(code) ((code) / 1000 * 1000)

typedef struct cudnnContext* cudnnHandle_t;

cudnnStatus_t cudnnCreate(cudnnHandle_t* handle);
cudnnStatus_t cudnnDestroy(cudnnHandle_t handle);
cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream);
cudnnStatus_t cudnnGetStream(cudnnHandle_t handle, cudaStream_t* stream);
const char* cudnnGetErrorString(cudnnStatus_t status);
