#include "models/layers/dropout/dropout.h"

#include "base/hash.h"
#include "models/layers/dropout/dropout_ref.h"
#include "models/layers/common.h"

namespace dp::models {

namespace {
// splitmix64 (base/hash.h): a cheap bijective mix so that nearby steps give unrelated streams.
constexpr uint64_t mix64(uint64_t z) { return splitmix64(z); }
// FNV-1a, 64-bit.
uint64_t hash_name(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return h;
}
// The largest p the registry accepts is just below 1 (the range is [0, 1) but checks are
// inclusive): p = 1 would scale by 1/0.
constexpr double kMaxP = 0.999999;
}  // namespace

Dropout::Dropout(std::string name, double p) : Layer(std::move(name)), p_(p) {
  DP_CHECK(p_ >= 0 && p_ < 1, "{}: p = {} outside [0, 1)", layer_str(*this), p_);
}

uint64_t Dropout::mask_stream(const std::string& layer_name, uint64_t step) {
  return mix64(hash_name(layer_name) ^ mix64(step + kStreamDropout));
}

Shape Dropout::setup(const std::vector<Shape>& in) {
  shape_ = single_input(*this, in);
  return shape_;
}

void Dropout::forward_cpu(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) {
  const DType dt = x[0].dtype();
  check_same_shape_io(*this, x[0], y, shape_);
  if (!ctx.training || p_ == 0) {
    y.copy_from(x[0]);
    return;
  }
  dispatch_float(*this, dt, [&](auto tag) {
    using T = decltype(tag);
    kernels::cpu::dropout_forward<T>(y.data<T>(), x[0].data<T>(), y.numel(), p_, ctx.seed,
                                     mask_stream(name_, ctx.step));
  });
}

void Dropout::backward_cpu(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor&, const Tensor& dy,
                           std::vector<Tensor>& dx) {
  if (!dx[0].defined()) return;
  const DType dt = x[0].dtype();
  const int64_t N = x[0].dim(0);
  check_batched(*this, dy, dt, N, shape_, "output gradient");
  check_batched(*this, dx[0], dt, N, shape_, "input gradient");
  if (!ctx.training || p_ == 0) {
    dx[0].copy_from(dy);
    return;
  }
  dispatch_float(*this, dt, [&](auto tag) {
    using T = decltype(tag);
    kernels::cpu::dropout_backward<T>(dx[0].data<T>(), dy.data<T>(), dy.numel(), p_, ctx.seed,
                                      mask_stream(name_, ctx.step));
  });
}

void register_dropout(LayerRegistry& r) {
  r.add("dropout", {float_arg("p", 0.5, 0.0, kMaxP)},
        [](const std::string& name, const LayerArgs& a) { return std::make_unique<Dropout>(name, a.f("p")); });
}

}  // namespace dp::models
