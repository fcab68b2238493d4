#include "runtime/optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "base/error.h"

namespace dp::optim {

void validate_schedule(const ScheduleOptions& o, int64_t total_steps) {
  if (!(o.base_lr >= 0) || !std::isfinite(o.base_lr))
    DP_THROW_USER("lr schedule: base_lr {} must be a finite value >= 0", o.base_lr);
  if (o.warmup_steps < 0) DP_THROW_USER("lr schedule: warmup_steps {} must be >= 0", o.warmup_steps);
  if (!(o.warmup_start_factor >= 0 && o.warmup_start_factor <= 1))
    DP_THROW_USER("lr schedule: warmup_start_factor {} must be in [0, 1]", o.warmup_start_factor);
  if (total_steps < 0) DP_THROW_USER("lr schedule: total_steps {} must be >= 0", total_steps);
  if (o.kind == ScheduleKind::Step) {
    if (o.step_size <= 0) DP_THROW_USER("lr schedule 'step': step_size {} must be > 0", o.step_size);
    if (!(o.gamma > 0) || !std::isfinite(o.gamma))
      DP_THROW_USER("lr schedule 'step': gamma {} must be a finite value > 0", o.gamma);
  }
  if (o.kind == ScheduleKind::Cosine) {
    if (!(o.min_lr >= 0 && o.min_lr <= o.base_lr))
      DP_THROW_USER("lr schedule 'cosine': min_lr {} must be in [0, base_lr = {}]", o.min_lr, o.base_lr);
    if (total_steps <= o.warmup_steps)
      DP_THROW_USER("lr schedule 'cosine': total_steps {} must exceed warmup_steps {} (the cosine needs steps to "
                    "decay over)",
                    total_steps, o.warmup_steps);
  }
}

double lr_at(const ScheduleOptions& o, int64_t step, int64_t total_steps) {
  validate_schedule(o, total_steps);
  DP_CHECK(step >= 0, "lr_at for step {}", step);
  if (step < o.warmup_steps) {
    const double f = o.warmup_start_factor;
    return o.base_lr * (f + (1.0 - f) * static_cast<double>(step) / static_cast<double>(o.warmup_steps));
  }
  const int64_t t = step - o.warmup_steps;
  switch (o.kind) {
    case ScheduleKind::Constant: return o.base_lr;
    case ScheduleKind::Step: return o.base_lr * std::pow(o.gamma, static_cast<double>(t / o.step_size));
    case ScheduleKind::Cosine: {
      const int64_t T = total_steps - o.warmup_steps;
      const double x = static_cast<double>(std::min(t, T)) / static_cast<double>(T);
      return o.min_lr + (o.base_lr - o.min_lr) * (1.0 + std::cos(std::numbers::pi * x)) / 2.0;
    }
  }
  DP_CHECK(false, "lr schedule kind {} is not handled", static_cast<int>(o.kind));
  return o.base_lr;
}

}  // namespace dp::optim
