// defines: AdamW, Adam with decoupled weight decay (Loshchilov & Hutter, ICLR 2019), with
// torch.optim.AdamW's semantics (bias-corrected moments, eps added after sqrt(v_hat), no amsgrad).
#pragma once
#include "kernels/optim_math.h"
#include "runtime/optim/optimizer.h"

namespace dp::optim {

class AdamW : public Optimizer {
 public:
  AdamW(int64_t numel, AdamWOptions options);  // throws UserError for invalid options
  const char* name() const override { return "adamw"; }
  void step(const Tensor& params, const Tensor& grads, double lr) override;
  // {"exp_avg", "exp_avg_sq"}
  std::vector<std::pair<std::string, Tensor>> state() const override;
  void load_state(const std::vector<std::pair<std::string, Tensor>>& state, int64_t steps) override;
  const AdamWOptions& options() const { return options_; }

 protected:
  void move_state(Device device) override;
  void update_span(float* p, const float* g, int64_t state_begin, int64_t n, double lr,
                   const kernels::DecaySkips& skips, Copy16 copy) override;

 private:
  kernels::AdamWScalars scalars(double lr) const;  // this step's (steps() + 1)
  // The fused kernel on the stream place() gave (adamw_cuda.cpp), over n elements of the arena at
  // p / g (device pointers) with the state from state_begin on, writing copy beside p.
  void step_device(float* p, const float* g, int64_t state_begin, int64_t n, const kernels::AdamWScalars& s,
                   Copy16 copy, const kernels::DecaySkips& skips);
  AdamWOptions options_;
  Tensor exp_avg_;     // (numel,) f32, first moment m
  Tensor exp_avg_sq_;  // (numel,) f32, second moment v
};

}  // namespace dp::optim
