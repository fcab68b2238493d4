// defines: LossScaleOptions, LossScaler — dynamic loss scaling for fp16 training, with
// torch.cuda.amp.GradScaler's rule (torch/amp/grad_scaler.py, _amp_update_scale_): multiply
// the loss by `scale`; unscale the gradients by inverse_scale() while checking for inf/NaN
// (kernels/cuda/cast.h: unscale_*); then update(found_inf): on inf/NaN skip the optimizer step
// and multiply the scale by backoff_factor; after growth_interval clean steps in a row multiply
// it by growth_factor (unless that overflows). Pure host logic (a float and a counter), so it
// is tested without a GPU and checkpointed as two numbers.
#pragma once
#include <cstdint>

namespace dp::cuda {

struct LossScaleOptions {
  float init_scale = 65536.0f;  // 2^16
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  int64_t growth_interval = 2000;
};

class LossScaler {
 public:
  // UserError for options torch refuses (growth_factor <= 1, backoff_factor outside (0, 1),
  // growth_interval < 1, a scale that is not finite and positive).
  explicit LossScaler(const LossScaleOptions& o = {});
  float scale() const { return scale_; }
  // 1 / scale as torch computes it: in double, then rounded to float.
  float inverse_scale() const;
  // Returns true when the step is to be applied (no inf/NaN was found), then updates the scale.
  bool update(bool found_inf);
  // Clean steps since the last change, for checkpoints (with scale()).
  int64_t growth_tracker() const { return tracker_; }
  void restore(float scale, int64_t growth_tracker);

 private:
  LossScaleOptions o_;
  float scale_;
  int64_t tracker_ = 0;
};

}  // namespace dp::cuda
