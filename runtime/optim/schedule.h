// defines: ScheduleKind (train.schedule) with its name table, ScheduleOptions and lr_at, the
// learning-rate schedule as a pure function of the step.
//
// Optional linear warmup, then one of:
//   constant  base_lr
//   step      base_lr * gamma^floor((step - warmup_steps) / step_size)          (torch StepLR)
//   cosine    min_lr + (base_lr - min_lr) * (1 + cos(pi * t / T)) / 2,           (torch
//             t = step - warmup_steps, T = total_steps - warmup_steps; t is      CosineAnnealingLR)
//             clamped to T, so steps past the end stay at min_lr
// Warmup: lr(step) = base_lr * (f + (1 - f) * step / warmup_steps) for step < warmup_steps, with
// f = warmup_start_factor: base_lr * f at step 0, rising linearly to base_lr at warmup_steps.
#pragma once
#include <cstdint>
#include <span>

#include "runtime/enum_names.h"

namespace dp::optim {

enum class ScheduleKind { Constant, Step, Cosine };

inline constexpr EnumName<ScheduleKind> kScheduleKindNames[] = {
    {ScheduleKind::Constant, "constant"}, {ScheduleKind::Step, "step"}, {ScheduleKind::Cosine, "cosine"}};
constexpr std::span<const EnumName<ScheduleKind>> enum_names(ScheduleKind) { return kScheduleKindNames; }

struct ScheduleOptions {
  ScheduleKind kind = ScheduleKind::Constant;
  double base_lr = 0.1;
  int64_t warmup_steps = 0;
  double warmup_start_factor = 0.0;  // lr at step 0 = base_lr * factor, linear to base_lr at warmup_steps
  int64_t step_size = 1000;          // step: decay every step_size steps after warmup
  double gamma = 0.1;                // step: decay factor
  double min_lr = 0;                 // cosine: the floor
};

// Throws UserError naming the bad field.
void validate_schedule(const ScheduleOptions& options, int64_t total_steps);

// The learning rate for 0-based `step` of a run of `total_steps` (validates `options` first).
double lr_at(const ScheduleOptions& options, int64_t step, int64_t total_steps);

}  // namespace dp::optim
