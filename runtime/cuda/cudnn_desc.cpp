#include "runtime/cuda/cudnn_desc.h"

#include <limits>

#include "runtime/cuda/check.h"

namespace dp::cuda {

namespace {
int as_int(int64_t v, const char* what) {
  DP_CHECK(v >= 0 && v <= std::numeric_limits<int>::max(), "cuDNN {} = {} is out of int range", what, v);
  return static_cast<int>(v);
}

// A descriptor made by `create` (cudnnCreate*Descriptor, named `what` in the error), for an
// owner's constructor.
template <typename D>
D created(cudnnStatus_t (*create)(D*), const char* what) {
  D d = nullptr;
  const cudnnStatus_t s = create(&d);
  if (s != CUDNN_STATUS_SUCCESS) fail_cudnn(s, what, __FILE__, __LINE__);
  return d;
}
}  // namespace

cudnnDataType_t cudnn_dtype(DType d) {
  switch (d) {
    case DType::F32: return CUDNN_DATA_FLOAT;
    case DType::F16: return CUDNN_DATA_HALF;
    case DType::BF16: return CUDNN_DATA_BFLOAT16;
    default: throw DpError(fmt::format("cuDNN computes in f32, f16 or bf16, not {}", dtype_name(d)));
  }
}

TensorDesc::TensorDesc() : Owner(created(cudnnCreateTensorDescriptor, "cudnnCreateTensorDescriptor")) {}
FilterDesc::FilterDesc() : Owner(created(cudnnCreateFilterDescriptor, "cudnnCreateFilterDescriptor")) {}
ConvDesc::ConvDesc() : Owner(created(cudnnCreateConvolutionDescriptor, "cudnnCreateConvolutionDescriptor")) {}
PoolDesc::PoolDesc() : Owner(created(cudnnCreatePoolingDescriptor, "cudnnCreatePoolingDescriptor")) {}

void TensorDesc::set(DType dtype, int64_t n, int64_t c, int64_t h, int64_t w, bool channels_last) {
  CHECK_CUDNN(cudnnSetTensor4dDescriptor(get(), channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                         cudnn_dtype(dtype), as_int(n, "n"), as_int(c, "c"), as_int(h, "h"),
                                         as_int(w, "w")));
}

void FilterDesc::set(DType dtype, int64_t k, int64_t c, int64_t r, int64_t s, bool channels_last) {
  CHECK_CUDNN(cudnnSetFilter4dDescriptor(get(), cudnn_dtype(dtype),
                                         channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, as_int(k, "k"),
                                         as_int(c, "c"), as_int(r, "r"), as_int(s, "s")));
}

void ConvDesc::set(int64_t pad, int64_t stride, int64_t groups, DType compute) {
  const int p = as_int(pad, "pad"), st = as_int(stride, "stride");
  CHECK_CUDNN(
      cudnnSetConvolution2dDescriptor(get(), p, p, st, st, 1, 1, CUDNN_CROSS_CORRELATION, cudnn_dtype(compute)));
  CHECK_CUDNN(cudnnSetConvolutionGroupCount(get(), as_int(groups, "groups")));
}

void PoolDesc::set(cudnnPoolingMode_t mode, int64_t kernel, int64_t stride, int64_t pad) {
  const int k = as_int(kernel, "kernel"), st = as_int(stride, "stride"), p = as_int(pad, "pad");
  CHECK_CUDNN(cudnnSetPooling2dDescriptor(get(), mode, CUDNN_PROPAGATE_NAN, k, k, p, p, st, st));
}

}  // namespace dp::cuda
