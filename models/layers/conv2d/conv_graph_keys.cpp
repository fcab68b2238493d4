#include "models/layers/conv2d/conv_graph_keys.h"

namespace dp::models {

namespace {
using cuda::GraphTensor;
using Dims = std::array<int64_t, 4>;

GraphTensor activation(const ConvGraphShape& s, const Dims& dims, const void* p) {
  return GraphTensor{dims, s.channels_last ? cuda::channels_last_strides(dims) : cuda::packed_strides(dims), s.dtype,
                     cuda::byte_alignment(p)};
}

GraphTensor filter(const ConvGraphShape& s, FilterLayout l, const void* p) {
  const Dims dims{s.d.OC, s.d.C / s.d.groups, s.d.K, s.d.K};
  return GraphTensor{dims, l == FilterLayout::Krsc ? cuda::channels_last_strides(dims) : cuda::packed_strides(dims),
                     s.dtype, cuda::byte_alignment(p)};
}

Dims x_dims(const ConvGraphShape& s) { return {s.d.N, s.d.C, s.d.H, s.d.W}; }
Dims y_dims(const ConvGraphShape& s) { return {s.d.N, s.d.OC, s.d.OH, s.d.OW}; }

cuda::PlanKey conv_key(const ConvGraphShape& s, cuda::GraphOp op) {
  cuda::PlanKey k;
  k.op = op;
  k.math = conv_math(s.dtype, s.tf32);
  k.conv = {s.d.pad, s.d.stride, 1};
  k.device = s.device;
  return k;
}
}  // namespace

std::vector<FilterLayout> filter_layouts(const kernels::cpu::Conv2dDims& d, bool channels_last) {
  const bool same_bytes = d.K == 1 || d.C / d.groups == 1;
  if (!channels_last || same_bytes) return {FilterLayout::Kcrs};
  return {FilterLayout::Kcrs, FilterLayout::Krsc};
}

FilterLayout filter_layout_of(const cuda::PlanKey& k) {
  const size_t i = k.op == cuda::GraphOp::ConvWgrad ? 2 : 1;
  const GraphTensor& w = k.tensors.at(i);
  return w.strides == cuda::packed_strides(w.dims) ? FilterLayout::Kcrs : FilterLayout::Krsc;
}

cuda::MathMode conv_math(DType dtype, bool tf32) {
  if (dtype != DType::F32) return cuda::MathMode::Tensor16;
  return tf32 ? cuda::MathMode::Tf32 : cuda::MathMode::Fma;
}

cuda::PlanKey conv_fprop_key(const ConvGraphShape& s, FilterLayout w_layout, uint8_t fusion, const void* x,
                             const void* w, const void* bias, const void* y) {
  cuda::PlanKey k = conv_key(s, cuda::GraphOp::ConvFprop);
  k.fusion = fusion;
  k.tensors = {activation(s, x_dims(s), x), filter(s, w_layout, w)};
  // The bias as a [1, K, 1, 1] tensor in the activations' layout (cuDNN's samples: NHWC strides
  // {K, 1, K, K} for an NHWC graph).
  if (fusion & cuda::kFuseBias) k.tensors.push_back(activation(s, {1, s.d.OC, 1, 1}, bias));
  k.tensors.push_back(activation(s, y_dims(s), y));
  return k;
}

cuda::PlanKey conv_dgrad_key(const ConvGraphShape& s, FilterLayout w_layout, const void* dy, const void* w,
                             const void* dx) {
  cuda::PlanKey k = conv_key(s, cuda::GraphOp::ConvDgrad);
  k.tensors = {activation(s, y_dims(s), dy), filter(s, w_layout, w), activation(s, x_dims(s), dx)};
  return k;
}

cuda::PlanKey conv_wgrad_key(const ConvGraphShape& s, FilterLayout dw_layout, const void* x, const void* dy,
                             const void* dw) {
  cuda::PlanKey k = conv_key(s, cuda::GraphOp::ConvWgrad);
  k.tensors = {activation(s, x_dims(s), x), activation(s, y_dims(s), dy), filter(s, dw_layout, dw)};
  return k;
}

}  // namespace dp::models
