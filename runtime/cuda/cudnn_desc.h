// defines: move-only owners (runtime/cuda/owner.h) of cuDNN descriptors (TensorDesc, FilterDesc,
// ConvDesc, PoolDesc) and cudnn_dtype, the DType -> cudnnDataType_t map. Each descriptor is
// created by its owner's constructor. The setters take the logical NCHW sizes and the memory
// layout (NCHW, or NHWC with channels_last), as the layers hold them.
#pragma once
#include <cudnn.h>

#include <cstdint>

#include "base/dtype.h"
#include "runtime/cuda/log_library_failure.h"
#include "runtime/cuda/owner.h"

namespace dp::cuda {

// F32, F16, BF16 (the float types cuDNN computes in); other dtypes throw a DpError.
cudnnDataType_t cudnn_dtype(DType d);

DP_CUDA_DESTROY(DestroyTensorDesc, cudnnDestroyTensorDescriptor);
DP_CUDA_DESTROY(DestroyFilterDesc, cudnnDestroyFilterDescriptor);
DP_CUDA_DESTROY(DestroyConvDesc, cudnnDestroyConvolutionDescriptor);
DP_CUDA_DESTROY(DestroyPoolDesc, cudnnDestroyPoolingDescriptor);

class TensorDesc : public Owner<cudnnTensorDescriptor_t, DestroyTensorDesc> {
 public:
  TensorDesc();  // creates the descriptor
  // A 4-D tensor of logical sizes [n, c, h, w], stored NCHW or (channels_last) NHWC.
  void set(DType dtype, int64_t n, int64_t c, int64_t h, int64_t w, bool channels_last);
};

class FilterDesc : public Owner<cudnnFilterDescriptor_t, DestroyFilterDesc> {
 public:
  FilterDesc();
  // Filter [k, c, r, s] (out channels, in channels per group, kernel rows, columns), stored
  // KCRS or (channels_last) KRSC.
  void set(DType dtype, int64_t k, int64_t c, int64_t r, int64_t s, bool channels_last);
};

class ConvDesc : public Owner<cudnnConvolutionDescriptor_t, DestroyConvDesc> {
 public:
  ConvDesc();
  // Cross-correlation (PyTorch's convolution), square padding/stride, dilation 1, `groups`.
  // compute: the accumulation type (F32 for every data type). The math type is the caller's
  // (models/layers/conv2d/conv_algos.h's conv_math_type: one place decides it).
  void set(int64_t pad, int64_t stride, int64_t groups, DType compute);
};

class PoolDesc : public Owner<cudnnPoolingDescriptor_t, DestroyPoolDesc> {
 public:
  PoolDesc();
  // Square window; mode: CUDNN_POOLING_MAX_DETERMINISTIC or an average mode. NaNs propagate
  // (a NaN in a window wins, as in F.max_pool2d and the CPU twin).
  void set(cudnnPoolingMode_t mode, int64_t kernel, int64_t stride, int64_t pad);
};

}  // namespace dp::cuda
