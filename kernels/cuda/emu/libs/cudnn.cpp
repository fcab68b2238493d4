// The emulated cuDNN's handle calls (kernels/cuda/emu/include/cudnn.h): no operation is emulated.
#include <cudnn.h>

#include "kernels/cuda/emu/libs/handles.h"

struct cudnnContext {
  cudaStream_t stream = nullptr;
};

namespace L = dp::emu::libs;

cudnnStatus_t cudnnCreate(cudnnHandle_t* handle) {
  return L::make_object(handle, CUDNN_STATUS_SUCCESS, CUDNN_STATUS_BAD_PARAM, "cudnnCreate");
}
cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
  delete handle;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream) {
  return L::bind_stream(handle, stream, CUDNN_STATUS_SUCCESS, CUDNN_STATUS_BAD_PARAM, CUDNN_STATUS_BAD_PARAM,
                        "cudnnSetStream");
}

cudnnStatus_t cudnnGetStream(cudnnHandle_t handle, cudaStream_t* stream) {
  return L::bound_stream(handle, stream, CUDNN_STATUS_SUCCESS, CUDNN_STATUS_BAD_PARAM, "cudnnGetStream");
}

const char* cudnnGetErrorString(cudnnStatus_t status) {
  switch (CUDNN_STATUS_CATEGORY(static_cast<int>(status))) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    case CUDNN_STATUS_INTERNAL_ERROR: return "CUDNN_STATUS_INTERNAL_ERROR";
    case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
    default: return "CUDNN_STATUS_UNKNOWN";
  }
}
