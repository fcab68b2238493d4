// defines: move-only owners of cuDNN descriptors (TensorDesc, FilterDesc, ConvDesc, PoolDesc)
// and cudnn_dtype, the DType -> cudnnDataType_t map. The setters take the logical NCHW sizes
// and the memory layout (NCHW, or NHWC with channels_last), as the layers hold them.
#pragma once
#include <cudnn.h>

#include <cstdint>

#include "base/dtype.h"

namespace dp::cuda {

// F32, F16, BF16 (the float types cuDNN computes in); other dtypes throw a DpError.
cudnnDataType_t cudnn_dtype(DType d);

class TensorDesc {
 public:
  TensorDesc();  // creates the descriptor
  ~TensorDesc();
  TensorDesc(TensorDesc&& o) noexcept;
  TensorDesc& operator=(TensorDesc&& o) noexcept;
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  // A 4-D tensor of logical sizes [n, c, h, w], stored NCHW or (channels_last) NHWC.
  void set(DType dtype, int64_t n, int64_t c, int64_t h, int64_t w, bool channels_last);
  cudnnTensorDescriptor_t get() const { return d_; }

 private:
  cudnnTensorDescriptor_t d_ = nullptr;
};

class FilterDesc {
 public:
  FilterDesc();
  ~FilterDesc();
  FilterDesc(FilterDesc&& o) noexcept;
  FilterDesc& operator=(FilterDesc&& o) noexcept;
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
  // Filter [k, c, r, s] (out channels, in channels per group, kernel rows, columns), stored
  // KCRS or (channels_last) KRSC.
  void set(DType dtype, int64_t k, int64_t c, int64_t r, int64_t s, bool channels_last);
  cudnnFilterDescriptor_t get() const { return d_; }

 private:
  cudnnFilterDescriptor_t d_ = nullptr;
};

class ConvDesc {
 public:
  ConvDesc();
  ~ConvDesc();
  ConvDesc(ConvDesc&& o) noexcept;
  ConvDesc& operator=(ConvDesc&& o) noexcept;
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
  // Cross-correlation (PyTorch's convolution), square padding/stride, dilation 1, `groups`.
  // compute: the accumulation type (F32 for every data type). tensor_ops: allow tensor-core math
  // (TF32 for f32 data; always for 16-bit data); false keeps f32 data at full FMA precision.
  void set(int64_t pad, int64_t stride, int64_t groups, DType compute, bool tensor_ops);
  cudnnConvolutionDescriptor_t get() const { return d_; }

 private:
  cudnnConvolutionDescriptor_t d_ = nullptr;
};

class PoolDesc {
 public:
  PoolDesc();
  ~PoolDesc();
  PoolDesc(PoolDesc&& o) noexcept;
  PoolDesc& operator=(PoolDesc&& o) noexcept;
  PoolDesc(const PoolDesc&) = delete;
  PoolDesc& operator=(const PoolDesc&) = delete;
  // Square window; mode: CUDNN_POOLING_MAX_DETERMINISTIC or an average mode. NaNs propagate
  // (a NaN in a window wins, as in F.max_pool2d and the CPU twin).
  void set(cudnnPoolingMode_t mode, int64_t kernel, int64_t stride, int64_t pad);
  cudnnPoolingDescriptor_t get() const { return d_; }

 private:
  cudnnPoolingDescriptor_t d_ = nullptr;
};

}  // namespace dp::cuda
