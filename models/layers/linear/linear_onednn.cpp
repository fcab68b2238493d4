// Linear's oneDNN path: kernels/cpu/onednn_matmul.h's LinearMatmul over the (rows, in) view of
// the input (rows = samples x positions), on the library linear_gemm_choice.h picks, with a ReLU
// post-op when the graph folded a relu into this layer; the weight and bias gradients are added (+=) into the gradient arena. With a fused
// ReLU the backward first masks dy by the output (the output is zero where the ReLU cut), into the
// step plan's scratch (backward_needs). A padded
// output (pad_out_to) is written and read in rows of ld_out_.
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/onednn_matmul.h"
#include "models/layers/common.h"
#include "models/layers/linear/linear.h"
#include "models/layers/linear/linear_gemm_choice.h"

namespace dp::models {

namespace dn = kernels::cpu::onednn;

struct Linear::OnednnState {
  explicit OnednnState(dn::LinearMatmul m) : mm(std::move(m)) {}
  dn::LinearMatmul mm;
  Tensor masked_dy;  // fused ReLU: dy masked by the output, once per shape when the step plans none
};

void Linear::forward_onednn(const StepContext& ctx, const Tensor& x, Tensor& y) {
  if (padded() && ctx.cpu_matmul_bf16)
    DP_THROW_USER("{}: pad_out_to = {} (rows of {} for {} outputs) does not run under train.precision = \"bf16\" on "
                  "the CPU; set pad_out_to = 1 or train.precision = \"fp32\"",
                  layer_str(*this), pad_out_to_, ld_out_, out_);
  onednn_state().mm.forward(linear_gemm(ctx), y.data<float>(), x.data<float>(), params_[0].data<float>(),
                            bias_ ? params_[1].data<float>() : nullptr, rows(x),
                            epilogue() == Epilogue::Relu);
}

void Linear::backward_onednn(const StepContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                             Tensor& dx) {
  const dn::GemmLibrary lib = linear_gemm(ctx);
  OnednnState& s = onednn_state();
  const float* g = dy.data<float>();
  if (epilogue() == Epilogue::Relu) {
    const Tensor m = planned_or_own(ctx.mem.scratch(dy.shape(), DType::F32), s.masked_dy, dy.shape());
    kernels::cpu::relu_backward<float>(m.data<float>(), g, y.data<float>(), dy.numel());
    g = m.data<float>();
  }
  s.mm.backward_weights(lib, grads_[0].data<float>(), bias_ ? grads_[1].data<float>() : nullptr, g,
                        x.data<float>(), rows(x));
  if (dx.defined()) s.mm.backward_data(lib, dx.data<float>(), g, params_[0].data<float>(), rows(x));
}

Linear::OnednnState& Linear::onednn_state() {
  if (!dnnl_) dnnl_.emplace(dn::LinearMatmul(layer_str(*this), in_, out_, bias_, ld_out_));
  return *dnnl_;
}

}  // namespace dp::models
