#include "runtime/optim/adamw.h"

#include <cmath>

#include "kernels/cpu/optim_adamw.h"
#include "runtime/memory_account.h"

namespace dp::optim {

AdamW::AdamW(int64_t numel, AdamWOptions o) : Optimizer(numel), options_(o) {
  auto bad = [](const char* what, double v, const char* want) {
    DP_THROW_USER("adamw: invalid {} {} (want {})", what, v, want);
  };
  if (!(o.beta1 >= 0 && o.beta1 < 1)) bad("beta1", o.beta1, "0 <= beta1 < 1");
  if (!(o.beta2 >= 0 && o.beta2 < 1)) bad("beta2", o.beta2, "0 <= beta2 < 1");
  if (!(o.eps >= 0) || !std::isfinite(o.eps)) bad("eps", o.eps, "a finite value >= 0");
  if (!(o.weight_decay >= 0) || !std::isfinite(o.weight_decay))
    bad("weight_decay", o.weight_decay, "a finite value >= 0");
  MemoryScope scope(MemoryCategory::OptimizerState);
  exp_avg_ = Tensor::zeros({numel}, DType::F32);
  exp_avg_sq_ = Tensor::zeros({numel}, DType::F32);
}

kernels::AdamWScalars AdamW::scalars(double lr) const {
  const double t = static_cast<double>(steps_ + 1);
  // Scalars in double, as torch computes them in Python (adam.py, _single_tensor_adam).
  const double bias_correction1 = 1.0 - std::pow(options_.beta1, t);
  const double bias_correction2 = 1.0 - std::pow(options_.beta2, t);
  kernels::AdamWScalars s;
  s.apply_decay = options_.weight_decay != 0;
  s.decay = static_cast<float>(1.0 - lr * options_.weight_decay);
  s.one_minus_beta1 = static_cast<float>(1.0 - options_.beta1);
  s.beta2 = static_cast<float>(options_.beta2);
  s.one_minus_beta2 = static_cast<float>(1.0 - options_.beta2);
  s.bias_correction2_sqrt = static_cast<float>(std::pow(bias_correction2, 0.5));
  s.neg_step_size = static_cast<float>(-(lr / bias_correction1));
  s.eps = static_cast<float>(options_.eps);
  return s;
}

void AdamW::step(const Tensor& params, const Tensor& grads, double lr) {
  check_step_args(params, grads, lr);
  const kernels::AdamWScalars s = scalars(lr);
  if (device_.is_cuda())
    step_device(static_cast<float*>(params.raw()), static_cast<const float*>(grads.raw()), 0, numel_, s,
                compute_copy(), decay_skips());
  else
    kernels::cpu::adamw_step(params.data<float>(), grads.data<float>(), exp_avg_.data<float>(),
                             exp_avg_sq_.data<float>(), numel_, s, decay_skips());
  ++steps_;
}

void AdamW::update_span(float* p, const float* g, int64_t state_begin, int64_t n, double lr,
                        const kernels::DecaySkips& skips, Copy16 copy) {
  if (device_.is_cuda()) return step_device(p, g, state_begin, n, scalars(lr), copy, skips);
  kernels::cpu::adamw_step(p, g, exp_avg_.data<float>() + state_begin, exp_avg_sq_.data<float>() + state_begin, n,
                           scalars(lr), skips);
}

void AdamW::move_state(Device device) {
  if (exp_avg_.defined()) {
    Tensor t = Tensor::zeros(exp_avg_.shape(), DType::F32, device);
    t.copy_from(exp_avg_);
    exp_avg_ = t;
  }
  if (exp_avg_sq_.defined()) {
    Tensor t = Tensor::zeros(exp_avg_sq_.shape(), DType::F32, device);
    t.copy_from(exp_avg_sq_);
    exp_avg_sq_ = t;
  }
}

std::vector<std::pair<std::string, Tensor>> AdamW::state() const {
  return {{"exp_avg", exp_avg_}, {"exp_avg_sq", exp_avg_sq_}};
}

void AdamW::load_state(const std::vector<std::pair<std::string, Tensor>>& state, int64_t steps) {
  load_slots(state, steps, this->state());
}

std::unique_ptr<Optimizer> make_adamw(int64_t numel, AdamWOptions options) {
  return std::make_unique<AdamW>(numel, options);
}

}  // namespace dp::optim
