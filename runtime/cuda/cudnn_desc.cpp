#include "runtime/cuda/cudnn_desc.h"

#include <limits>
#include <utility>

#include "runtime/cuda/log_failure.h"
#include "runtime/cuda/check.h"

namespace dp::cuda {

namespace {
int as_int(int64_t v, const char* what) {
  DP_CHECK(v >= 0 && v <= std::numeric_limits<int>::max(), "cuDNN {} = {} is out of int range", what, v);
  return static_cast<int>(v);
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

// The four owners differ only in the descriptor type and its create/destroy pair.
#define DP_CUDNN_DESC_OWNER(Class, create_fn, destroy_fn)                          \
  Class::Class() { CHECK_CUDNN(create_fn(&d_)); }                                  \
  Class::~Class() {                                                                \
    if (d_) log_if_failed(destroy_fn(d_), #destroy_fn);                            \
  }                                                                                \
  Class::Class(Class&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}           \
  Class& Class::operator=(Class&& o) noexcept {                                    \
    if (this != &o) {                                                              \
      if (d_) log_if_failed(destroy_fn(d_), #destroy_fn);                          \
      d_ = std::exchange(o.d_, nullptr);                                           \
    }                                                                              \
    return *this;                                                                  \
  }

DP_CUDNN_DESC_OWNER(TensorDesc, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor)
DP_CUDNN_DESC_OWNER(FilterDesc, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor)
DP_CUDNN_DESC_OWNER(ConvDesc, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor)
DP_CUDNN_DESC_OWNER(PoolDesc, cudnnCreatePoolingDescriptor, cudnnDestroyPoolingDescriptor)
#undef DP_CUDNN_DESC_OWNER

void TensorDesc::set(DType dtype, int64_t n, int64_t c, int64_t h, int64_t w, bool channels_last) {
  CHECK_CUDNN(cudnnSetTensor4dDescriptor(d_, channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, cudnn_dtype(dtype),
                                         as_int(n, "n"), as_int(c, "c"), as_int(h, "h"), as_int(w, "w")));
}

void FilterDesc::set(DType dtype, int64_t k, int64_t c, int64_t r, int64_t s, bool channels_last) {
  CHECK_CUDNN(cudnnSetFilter4dDescriptor(d_, cudnn_dtype(dtype), channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                         as_int(k, "k"), as_int(c, "c"), as_int(r, "r"), as_int(s, "s")));
}

void ConvDesc::set(int64_t pad, int64_t stride, int64_t groups, DType compute, bool tensor_ops) {
  const int p = as_int(pad, "pad"), st = as_int(stride, "stride");
  CHECK_CUDNN(cudnnSetConvolution2dDescriptor(d_, p, p, st, st, 1, 1, CUDNN_CROSS_CORRELATION, cudnn_dtype(compute)));
  CHECK_CUDNN(cudnnSetConvolutionGroupCount(d_, as_int(groups, "groups")));
  CHECK_CUDNN(cudnnSetConvolutionMathType(d_, tensor_ops ? CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION : CUDNN_FMA_MATH));
}

void PoolDesc::set(cudnnPoolingMode_t mode, int64_t kernel, int64_t stride, int64_t pad) {
  const int k = as_int(kernel, "kernel"), st = as_int(stride, "stride"), p = as_int(pad, "pad");
  CHECK_CUDNN(cudnnSetPooling2dDescriptor(d_, mode, CUDNN_PROPAGATE_NAN, k, k, p, p, st, st));
}

}  // namespace dp::cuda
