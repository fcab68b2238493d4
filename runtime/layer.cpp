#include "runtime/layer.h"

namespace dp {

void Layer::bind(std::vector<Tensor> params, std::vector<Tensor> grads, std::vector<Tensor> buffers) {
  DP_CHECK(params.size() == grads.size(), "layer '{}': {} params but {} grads", name_, params.size(), grads.size());
  params_ = std::move(params);
  grads_ = std::move(grads);
  buffers_ = std::move(buffers);
}

void Layer::set_gpu_epilogue(Epilogue e) {
  DP_CHECK(e == Epilogue::None || can_fuse_gpu_epilogue(), "layer '{}' ({}) cannot fuse a {} epilogue", name_, type(),
           epilogue_name(e));
  gpu_epilogue_ = e;
}

void Layer::forward(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) {
  DP_CHECK(static_cast<int>(x.size()) == run_inputs(), "layer '{}' ({}) takes {} inputs, got {}", name_, type(),
           run_inputs(), x.size());
  if (y.device().is_cpu()) forward_cpu(ctx, x, y);
  else forward_cuda(ctx, x, y);
}

void Layer::backward(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor& y, const Tensor& dy,
                     std::vector<Tensor>& dx) {
  DP_CHECK(dx.size() == x.size(), "layer '{}': {} inputs but {} input gradients", name_, x.size(), dx.size());
  if (y.device().is_cpu()) backward_cpu(ctx, x, y, dy, dx);
  else backward_cuda(ctx, x, y, dy, dx);
}

void Layer::forward_cuda(const StepContext&, const std::vector<Tensor>&, Tensor&) {
  throw DpError(fmt::format("layer '{}' of type {} has no CUDA path in this build [{}]", name_, type(),
                            identity_string()));
}

void Layer::backward_cuda(const StepContext&, const std::vector<Tensor>&, const Tensor&, const Tensor&,
                          std::vector<Tensor>&) {
  throw DpError(fmt::format("layer '{}' of type {} has no CUDA path in this build [{}]", name_, type(),
                            identity_string()));
}

}  // namespace dp
