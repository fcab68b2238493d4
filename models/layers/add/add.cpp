#include "models/layers/add/add.h"

#include "kernels/cpu/elementwise.h"
#include "models/layers/common.h"

namespace dp::models {

Shape Add::setup(const std::vector<Shape>& in) {
  if (in.size() != 2) DP_THROW_USER("{}: takes 2 inputs, got {}", layer_str(*this), in.size());
  if (in[0] != in[1])
    DP_THROW_USER("{}: inputs have different shapes {} and {}; add needs identical shapes", layer_str(*this),
                  shape_str(in[0]), shape_str(in[1]));
  shape_ = in[0];
  return shape_;
}

void Add::forward_cpu(const StepContext&, const std::vector<Tensor>& x, Tensor& y) {
  const DType dt = x[0].dtype();
  const int64_t N = x[0].dim(0);
  check_batched(*this, x[0], dt, N, shape_, "input 0");
  check_batched(*this, x[1], dt, N, shape_, "input 1");
  check_batched(*this, y, dt, N, shape_, "output");
  dispatch_float(*this, dt, [&](auto tag) {
    using T = decltype(tag);
    if (epilogue() == Epilogue::Relu)
      kernels::cpu::add_relu<T>(y.data<T>(), x[0].data<T>(), x[1].data<T>(), y.numel());
    else kernels::cpu::add<T>(y.data<T>(), x[0].data<T>(), x[1].data<T>(), y.numel());
  });
}

void Add::backward_cpu(const StepContext&, const std::vector<Tensor>& x, const Tensor& y, const Tensor& dy,
                       std::vector<Tensor>& dx) {
  const int64_t N = x[0].dim(0);
  check_batched(*this, dy, x[0].dtype(), N, shape_, "output gradient");
  const Tensor* first = nullptr;  // the first input gradient written
  for (auto& g : dx) {
    if (!g.defined()) continue;
    check_batched(*this, g, x[0].dtype(), N, shape_, "input gradient");
    if (first != nullptr) {
      g.copy_from(*first);
    } else if (epilogue() == Epilogue::Relu) {
      dispatch_float(*this, g.dtype(), [&](auto tag) {
        using T = decltype(tag);
        kernels::cpu::relu_backward<T>(g.data<T>(), dy.data<T>(), y.data<T>(), g.numel());
      });
    } else {
      g.copy_from(dy);
    }
    first = &g;
  }
}

void register_add(LayerRegistry& r) {
  r.add("add", {}, [](const std::string& name, const LayerArgs&) { return std::make_unique<Add>(name); });
}

}  // namespace dp::models
