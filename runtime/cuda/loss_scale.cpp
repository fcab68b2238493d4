#include "runtime/cuda/loss_scale.h"

#include <cmath>

#include "base/error.h"

namespace dp::cuda {
namespace {
void check_scale(float s, const char* what) {
  if (!(std::isfinite(s) && s > 0.0f)) DP_THROW_USER("{} = {} must be finite and > 0", what, s);
}
}  // namespace

LossScaler::LossScaler(const LossScaleOptions& o) : o_(o), scale_(o.init_scale) {
  check_scale(o.init_scale, "loss scale init_scale");
  if (!(o.growth_factor > 1.0f) || !std::isfinite(o.growth_factor))
    DP_THROW_USER("loss scale growth_factor = {} must be finite and > 1", o.growth_factor);
  if (!(o.backoff_factor > 0.0f && o.backoff_factor < 1.0f))
    DP_THROW_USER("loss scale backoff_factor = {} must be in (0, 1)", o.backoff_factor);
  if (o.growth_interval < 1) DP_THROW_USER("loss scale growth_interval = {} must be >= 1", o.growth_interval);
}

float LossScaler::inverse_scale() const { return static_cast<float>(1.0 / static_cast<double>(scale_)); }

bool LossScaler::update(bool found_inf) {
  if (found_inf) {
    scale_ *= o_.backoff_factor;
    tracker_ = 0;
    return false;
  }
  if (++tracker_ == o_.growth_interval) {
    const float grown = scale_ * o_.growth_factor;
    if (std::isfinite(grown)) scale_ = grown;  // torch keeps the scale rather than reach inf
    tracker_ = 0;
  }
  return true;
}

void LossScaler::restore(float scale, int64_t growth_tracker) {
  check_scale(scale, "restored loss scale");
  if (growth_tracker < 0 || growth_tracker >= o_.growth_interval)
    DP_THROW_USER("restored loss-scale growth tracker {} is outside [0, {})", growth_tracker, o_.growth_interval);
  scale_ = scale;
  tracker_ = growth_tracker;
}

}  // namespace dp::cuda
