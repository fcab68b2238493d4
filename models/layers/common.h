// defines: helpers shared by the layers: "layer 'x' (type)" prefixes, the plan's kept and scratch tensors, f32/f64 dispatch,
// batched-shape checks (with_batch: base/shape.h), output-size arithmetic, ArgSpec builders and PyTorch's initialisers.
#pragma once
#include <string>
#include <vector>

#include "runtime/layer_registry.h"

namespace dp::models {

// A layer's kept or scratch tensor: the step plan's view (LayerMemory::kept / scratch, defined
// under a CPU graph), else `own`, made for `shape` once (a layer run alone).
inline Tensor planned_or_own(Tensor planned, Tensor& own, const Shape& shape, DType dtype = DType::F32) {
  if (planned.defined()) return planned;
  return ensure_tensor(own, shape, dtype, Device::cpu());
}

// "layer 'conv2' (conv2d)", the start of every message about a layer.
std::string layer_str(const Layer& layer);

// The per-sample shape of a layer's one input; a DpError unless it has exactly one (the graph
// wires num_inputs() inputs, so more is an internal error).
const Shape& single_input(const Layer& layer, const std::vector<Shape>& in);

// Throws UserError unless the layer has exactly one input and it has `rank` dimensions, naming
// what the layer expects (e.g. "[C, H, W]").
void expect_single_input_rank(const Layer& layer, const std::vector<Shape>& in, size_t rank, const char* expected);

// Run-time checks that `t` is a `dtype` tensor of `shape` ([batch, per_sample...] for
// check_batched): internal invariants (the graph allocates these), so DpErrors naming the layer.
void check_tensor(const Layer& layer, const Tensor& t, DType dtype, const Shape& shape, const char* what);
void check_batched(const Layer& layer, const Tensor& t, DType dtype, int64_t batch, const Shape& per_sample,
                   const char* what);
// A shape-preserving layer's forward: x and y are both [N, per_sample...] in x's dtype.
void check_same_shape_io(const Layer& layer, const Tensor& x, const Tensor& y, const Shape& per_sample);
// A one-input layer's backward: dy is [N, out_per_sample...] and dx, where defined, [N,
// in_per_sample...], both in x's dtype (N: x's batch).
void check_backward_io(const Layer& layer, const Tensor& x, const Tensor& dy, const Tensor& dx,
                       const Shape& in_per_sample, const Shape& out_per_sample);
// The GPU twin of check_tensor: `t` is defined, a `dtype` tensor of `shape` on a CUDA device.
void check_gpu_tensor(const Layer& layer, const Tensor& t, DType dtype, const Shape& shape, const char* what);
// Every bound gradient is `dtype` with its parameter's shape.
void check_grads(const Layer& layer, DType dtype);

// Calls f(float{}) or f(double{}) by dtype; other dtypes are a DpError naming the layer.
template <typename F>
void dispatch_float(const Layer& layer, DType dtype, F&& f) {
  if (dtype == DType::F32) f(float{});
  else if (dtype == DType::F64) f(double{});
  else throw DpError(fmt::format("{}: CPU path supports f32 and f64 tensors, not {}", layer_str(layer), dtype_name(dtype)));
}

// Pointer to t's data as T, or nullptr for an undefined tensor (an optional gradient).
template <typename T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// The layer's oneDNN path serves this call: the oneDNN backend and f32 tensors (f64, the
// gradient checks' dtype, always takes the reference kernels).
inline bool use_onednn(const StepContext& ctx, DType dtype) {
  return ctx.cpu_backend == CpuBackend::OneDnn && dtype == DType::F32;
}

// The reference kernels are NCHW and unfused: a DpError naming the layer when a call under
// ctx.channels_last (4-D x) or with an epilogue (a fused ReLU) reaches them (the graph sets either
// only with the oneDNN backend, whose layers take f32 there).
void check_reference_layout(const Layer& layer, const StepContext& ctx, const Tensor& x);

// Output size along one axis of a convolution or pooling window: floor((in + 2 pad - k) /
// stride) + 1, or 0 when the padded input is smaller than the window.
int64_t window_out_size(int64_t in, int64_t k, int64_t stride, int64_t pad);

// ArgSpec builders, so registrations read as a table. Ranges are inclusive.
ArgSpec int_arg(const std::string& name, std::optional<int64_t> default_value, int64_t min);  // nullopt: required
ArgSpec float_arg(const std::string& name, double default_value, double min, double max = 1e300);
ArgSpec bool_arg(const std::string& name, bool default_value);
ArgSpec choice_arg(const std::string& name, const std::string& default_value, std::vector<std::string> choices);

// PyTorch's initialisers; they fill f32 (the graph) or f64 (tests) tensors.
InitFn init_uniform(double bound);  // U(-bound, bound)
InitFn init_normal(double std);     // N(0, std^2)
InitFn init_constant(double value);

}  // namespace dp::models
