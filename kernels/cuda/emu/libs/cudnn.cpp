// The emulated cuDNN's handle calls (kernels/cuda/emu/include/cudnn.h): no operation is emulated.
#include <cudnn.h>

#include "kernels/cuda/emu/libs/elements.h"

struct cudnnContext {
  cudaStream_t stream = nullptr;
};

using dp::emu::libs::library_refusal;

cudnnStatus_t cudnnCreate(cudnnHandle_t* handle) {
  if (handle == nullptr) return library_refusal(CUDNN_STATUS_BAD_PARAM, "cudnnCreate", "null handle pointer");
  *handle = new cudnnContext{};
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
  delete handle;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return library_refusal(CUDNN_STATUS_BAD_PARAM, "cudnnSetStream", "null handle");
  if (!dp::emu::libs::known_stream(stream, "cudnnSetStream")) return CUDNN_STATUS_BAD_PARAM;
  handle->stream = stream;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetStream(cudnnHandle_t handle, cudaStream_t* stream) {
  if (handle == nullptr || stream == nullptr)
    return library_refusal(CUDNN_STATUS_BAD_PARAM, "cudnnGetStream", "null handle or result pointer");
  *stream = handle->stream;
  return CUDNN_STATUS_SUCCESS;
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
