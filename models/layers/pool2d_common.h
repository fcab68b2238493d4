// defines: what maxpool2d and avgpool2d share: their arguments, the setup-time validation of a
// pooling window against a [C, H, W] input, and Pool2dLayer, the base that holds the window and
// checks each batch's tensors, so a pooling layer only names its kernels.
#pragma once
#include "kernels/cpu/pool2d.h"
#include "runtime/layer_registry.h"

namespace dp::models {

// kernel (int, required, >= 1), stride (int, 0 = kernel, >= 0), padding (int, 0, >= 0).
std::vector<ArgSpec> pool2d_arg_specs();

// Validates like torch (padding at most half the kernel, output at least 1x1) and returns the
// dimensions with N = 0 (set per batch). stride 0 means stride = kernel.
kernels::cpu::Pool2dDims setup_pool2d(const Layer& layer, const std::vector<Shape>& in, int64_t kernel, int64_t stride,
                                      int64_t padding);

class Pool2dLayer : public Layer {
 public:
  // stride 0: same as kernel.
  Pool2dLayer(std::string name, int64_t kernel, int64_t stride, int64_t padding)
      : Layer(std::move(name)), kernel_(kernel), stride_(stride), padding_(padding) {}
  // Input [C, H, W] -> [C, OH, OW].
  Shape setup(const std::vector<Shape>& in) override;

 protected:
  // The window's dimensions for a batch of x (N, C, H, W), after checking the other tensors of
  // the call for dtype and shape: forward y (N, C, OH, OW); backward dy, then dx (N, C, H, W).
  kernels::cpu::Pool2dDims forward_dims(const Tensor& x, const Tensor& y) const;
  kernels::cpu::Pool2dDims backward_dims(const Tensor& x, const Tensor& dy, const Tensor& dx) const;

 private:
  int64_t kernel_, stride_, padding_;
  kernels::cpu::Pool2dDims d_{};
};

}  // namespace dp::models
