#include "models/layers/common.h"

namespace dp::models {

std::string layer_str(const Layer& layer) { return fmt::format("layer '{}' ({})", layer.name(), layer.type()); }

const Shape& single_input(const Layer& layer, const std::vector<Shape>& in) {
  DP_CHECK(in.size() == 1, "{}: takes 1 input, got {}", layer_str(layer), in.size());
  return in[0];
}

void expect_single_input_rank(const Layer& layer, const std::vector<Shape>& in, size_t rank, const char* expected) {
  if (single_input(layer, in).size() != rank)
    DP_THROW_USER("{}: input per-sample shape is {}, expected {} dimensions {}", layer_str(layer), shape_str(in[0]),
                  rank, expected);
}

void check_tensor(const Layer& layer, const Tensor& t, DType dtype, const Shape& shape, const char* what) {
  DP_CHECK(t.defined(), "{}: {} is undefined", layer_str(layer), what);
  DP_CHECK(t.dtype() == dtype && t.shape() == shape && t.device().is_cpu(), "{}: {} is {}, expected {}{} on cpu",
           layer_str(layer), what, t.describe(), dtype_name(dtype), shape_str(shape));
}

void check_batched(const Layer& layer, const Tensor& t, DType dtype, int64_t batch, const Shape& per_sample,
                   const char* what) {
  check_tensor(layer, t, dtype, with_batch(batch, per_sample), what);
}

void check_same_shape_io(const Layer& layer, const Tensor& x, const Tensor& y, const Shape& per_sample) {
  const int64_t N = x.dim(0);
  check_batched(layer, x, x.dtype(), N, per_sample, "input");
  check_batched(layer, y, x.dtype(), N, per_sample, "output");
}

void check_backward_io(const Layer& layer, const Tensor& x, const Tensor& dy, const Tensor& dx,
                       const Shape& in_per_sample, const Shape& out_per_sample) {
  const int64_t N = x.dim(0);
  check_batched(layer, dy, x.dtype(), N, out_per_sample, "output gradient");
  if (dx.defined()) check_batched(layer, dx, x.dtype(), N, in_per_sample, "input gradient");
}

void check_gpu_tensor(const Layer& layer, const Tensor& t, DType dtype, const Shape& shape, const char* what) {
  DP_CHECK(t.defined(), "{}: {} is undefined", layer_str(layer), what);
  DP_CHECK(t.dtype() == dtype && t.shape() == shape && t.device().is_cuda(), "{}: {} is {}, expected {}{} on a GPU",
           layer_str(layer), what, t.describe(), dtype_name(dtype), shape_str(shape));
}

void check_grads(const Layer& layer, DType dtype) {
  for (size_t i = 0; i < layer.grads().size(); ++i)
    check_tensor(layer, layer.grads()[i], dtype, layer.params()[i].shape(), "parameter gradient");
}

void check_reference_layout(const Layer& layer, const StepContext& ctx, const Tensor& x) {
  const bool folded = layer.epilogue() != Epilogue::None;
  DP_CHECK(!is_channels_last(ctx, x) && !folded,
           "{}: the reference CPU kernels got {} (they take NCHW, unfused; the graph plans channels-last "
           "activations and fused ReLUs for the oneDNN backend, f32, only)",
           layer_str(layer),
           folded ? fmt::format("a fused {} epilogue", epilogue_name(layer.epilogue())) : "channels-last activations");
}

int64_t window_out_size(int64_t in, int64_t k, int64_t stride, int64_t pad) {
  const int64_t span = in + 2 * pad - k;
  return span < 0 ? 0 : span / stride + 1;
}

ArgSpec int_arg(const std::string& name, std::optional<int64_t> default_value, int64_t min) {
  ArgSpec a;
  a.name = name;
  a.kind = ArgKind::Int;
  if (default_value) a.default_value = ArgValue{*default_value};
  a.min = static_cast<double>(min);
  return a;
}

ArgSpec float_arg(const std::string& name, double default_value, double min, double max) {
  ArgSpec a;
  a.name = name;
  a.kind = ArgKind::Float;
  a.default_value = ArgValue{default_value};
  a.min = min;
  a.max = max;
  return a;
}

ArgSpec bool_arg(const std::string& name, bool default_value) {
  ArgSpec a;
  a.name = name;
  a.kind = ArgKind::Bool;
  a.default_value = ArgValue{default_value};
  return a;
}

ArgSpec choice_arg(const std::string& name, const std::string& default_value, std::vector<std::string> choices) {
  ArgSpec a;
  a.name = name;
  a.kind = ArgKind::String;
  a.default_value = ArgValue{default_value};
  a.choices = std::move(choices);
  return a;
}

namespace {
// Fills every element of a CPU f32/f64 tensor with gen().
template <typename G>
void fill_with(const Tensor& t, G&& gen) {
  DP_CHECK(t.device().is_cpu(), "parameter initialisation needs a CPU tensor, got {}", t.describe());
  if (t.dtype() == DType::F32) {
    float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(gen());
  } else {
    double* p = t.data<double>();  // checks the dtype
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = gen();
  }
}
}  // namespace

InitFn init_uniform(double bound) {
  return [bound](Tensor& t, Rng& rng) { fill_with(t, [&] { return rng.uniform(-bound, bound); }); };
}

InitFn init_normal(double std) {
  return [std](Tensor& t, Rng& rng) { fill_with(t, [&] { return std * rng.normal(); }); };
}

InitFn init_constant(double value) {
  return [value](Tensor& t, Rng&) { fill_with(t, [&] { return value; }); };
}

}  // namespace dp::models
