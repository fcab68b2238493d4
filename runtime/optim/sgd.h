// defines: Sgd, stochastic gradient descent with momentum, dampening, weight decay and Nesterov,
// with torch.optim.SGD's semantics (the momentum buffer starts as the first step's gradient).
#pragma once
#include "kernels/optim_math.h"
#include "runtime/optim/optimizer.h"

namespace dp::optim {

class Sgd : public Optimizer {
 public:
  Sgd(int64_t numel, SgdOptions options);  // throws UserError for invalid options
  const char* name() const override { return "sgd"; }
  void step(const Tensor& params, const Tensor& grads, double lr) override;
  // {"momentum_buffer"} when momentum != 0, else nothing.
  std::vector<std::pair<std::string, Tensor>> state() const override;
  void load_state(const std::vector<std::pair<std::string, Tensor>>& state, int64_t steps) override;
  const SgdOptions& options() const { return options_; }

 protected:
  void update_span(float* p, const float* g, int64_t state_begin, int64_t n, double lr,
                   const kernels::DecaySkips& skips, Copy16 copy) override;
  void move_state(Device device) override;

 private:
  kernels::SgdScalars scalars(double lr) const;  // this step's
  // The fused kernel on the stream place() gave (sgd_cuda.cpp), over n elements of the arena at
  // p / g (device pointers); buf: their momentum buffer elements or null; writing copy beside p.
  void step_device(float* p, const float* g, float* buf, int64_t n, const kernels::SgdScalars& s, Copy16 copy,
                   const kernels::DecaySkips& skips);
  SgdOptions options_;
  Tensor momentum_buffer_;  // (numel,) f32; allocated only with momentum
};

}  // namespace dp::optim
