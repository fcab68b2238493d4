// defines: MaxPool2d, layer type "maxpool2d": 2-D max pooling (PyTorch's F.max_pool2d: -inf padding, floor mode), and its registration.
#pragma once
#include "kernels/cpu/pool2d.h"
#include "runtime/layer_registry.h"

namespace dp::models {

class MaxPool2d : public Layer {
 public:
  // stride 0: same as kernel.
  MaxPool2d(std::string name, int64_t kernel, int64_t stride, int64_t padding);
  const char* type() const override { return "maxpool2d"; }
  // Input [C, H, W] -> [C, OH, OW].
  Shape setup(const std::vector<Shape>& in) override;

 protected:
  void forward_cpu(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) override;
  void backward_cpu(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor& y, const Tensor& dy,
                    std::vector<Tensor>& dx) override;

 private:
  int64_t kernel_, stride_, padding_;
  kernels::cpu::Pool2dDims d_{};
};

// kernel (int, required, >= 1), stride (int, 0 = kernel), padding (int, 0, at most kernel/2).
void register_maxpool2d(LayerRegistry& r);

}  // namespace dp::models
