// defines: Precision (train.precision), the compute precision of a run, and its name table.
// What it means on a GPU (the activations' dtype, channels-last layout, loss scaling) is
// launch/gpu_run.h's; the CPU computes in fp32 only.
#pragma once
#include <span>

#include "runtime/enum_names.h"

namespace dp {

enum class Precision { Fp32, Bf16, Fp16 };

inline constexpr EnumName<Precision> kPrecisionNames[] = {
    {Precision::Fp32, "fp32"}, {Precision::Bf16, "bf16"}, {Precision::Fp16, "fp16"}};
constexpr std::span<const EnumName<Precision>> enum_names(Precision) { return kPrecisionNames; }

}  // namespace dp
