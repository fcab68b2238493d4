#include "runtime/optim/sgd.h"

#include <cmath>

#include "kernels/cpu/optim_sgd.h"
#include "runtime/memory_account.h"

namespace dp::optim {

Sgd::Sgd(int64_t numel, SgdOptions o) : Optimizer(numel), options_(o) {
  auto bad = [](const char* what, double v, const char* want) {
    DP_THROW_USER("sgd: invalid {} {} (want {})", what, v, want);
  };
  if (!(o.momentum >= 0) || !std::isfinite(o.momentum)) bad("momentum", o.momentum, "a finite value >= 0");
  if (!std::isfinite(o.dampening)) bad("dampening", o.dampening, "a finite value");
  if (!(o.weight_decay >= 0) || !std::isfinite(o.weight_decay))
    bad("weight_decay", o.weight_decay, "a finite value >= 0");
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
    DP_THROW_USER("sgd: nesterov needs momentum > 0 and dampening = 0 (got momentum {}, dampening {})", o.momentum,
                  o.dampening);
  MemoryScope scope(MemoryCategory::OptimizerState);
  if (o.momentum != 0) momentum_buffer_ = Tensor::zeros({numel}, DType::F32);
}

kernels::SgdScalars Sgd::scalars(double lr) const {
  kernels::SgdScalars s;
  s.neg_lr = static_cast<float>(-lr);
  s.weight_decay = static_cast<float>(options_.weight_decay);
  s.momentum = static_cast<float>(options_.momentum);
  s.one_minus_dampening = static_cast<float>(1.0 - options_.dampening);
  s.nesterov = options_.nesterov;
  s.first_step = steps_ == 0;
  return s;
}

void Sgd::step(const Tensor& params, const Tensor& grads, double lr) {
  check_step_args(params, grads, lr);
  const kernels::SgdScalars s = scalars(lr);
  float* buf = momentum_buffer_.defined() ? static_cast<float*>(momentum_buffer_.raw()) : nullptr;
  if (device_.is_cuda())
    step_device(static_cast<float*>(params.raw()), static_cast<const float*>(grads.raw()), buf, numel_, s, compute_copy(),
                decay_skips());
  else kernels::cpu::sgd_step(params.data<float>(), grads.data<float>(), buf, numel_, s, decay_skips());
  ++steps_;
}

void Sgd::update_span(float* p, const float* g, int64_t state_begin, int64_t n, double lr,
                      const kernels::DecaySkips& skips, Copy16 copy) {
  float* buf = momentum_buffer_.defined() ? static_cast<float*>(momentum_buffer_.raw()) + state_begin : nullptr;
  if (device_.is_cuda()) return step_device(p, g, buf, n, scalars(lr), copy, skips);
  kernels::cpu::sgd_step(p, g, buf, n, scalars(lr), skips);
}

void Sgd::move_state(Device device) {
  if (momentum_buffer_.defined()) {
    Tensor t = Tensor::zeros(momentum_buffer_.shape(), DType::F32, device);
    t.copy_from(momentum_buffer_);
    momentum_buffer_ = t;
  }
}

std::vector<std::pair<std::string, Tensor>> Sgd::state() const {
  if (!momentum_buffer_.defined()) return {};
  return {{"momentum_buffer", momentum_buffer_}};
}

void Sgd::load_state(const std::vector<std::pair<std::string, Tensor>>& state, int64_t steps) {
  load_slots(state, steps, this->state());
}

std::unique_ptr<Optimizer> make_sgd(int64_t numel, SgdOptions options) {
  return std::make_unique<Sgd>(numel, options);
}

}  // namespace dp::optim
