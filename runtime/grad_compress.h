// defines: GradCompress (dist.compress), the dtype gradients travel in between ranks, its name
// table and wire_dtype. Buckets are averaged in f32 whatever the wire (collectives/reducer/).
#pragma once
#include <span>

#include "base/dtype.h"
#include "runtime/enum_names.h"

namespace dp {

enum class GradCompress { None, Bf16, Fp16 };

inline constexpr EnumName<GradCompress> kGradCompressNames[] = {
    {GradCompress::None, "none"}, {GradCompress::Bf16, "bf16"}, {GradCompress::Fp16, "fp16"}};
constexpr std::span<const EnumName<GradCompress>> enum_names(GradCompress) { return kGradCompressNames; }

// The reducer's wire dtype: F32 (none), BF16 or F16.
constexpr DType wire_dtype(GradCompress c) {
  switch (c) {
    case GradCompress::None: return DType::F32;
    case GradCompress::Bf16: return DType::BF16;
    case GradCompress::Fp16: return DType::F16;
  }
  return DType::F32;  // not reached: every enumerator is handled above
}

}  // namespace dp
