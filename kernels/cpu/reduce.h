// defines: the elementwise reductions of the collectives (raw pointers, no tensors):
// reduce (dst = a op b) and divide (dst /= divisor, the second half of an average).
//
// Every backend and every test oracle combines values through these two functions, so "the
// same order" means the same bits: a reduction's result depends only on the order in which
// the collective algorithm pairs operands (documented in collectives/ring/), never on how a
// loop here is vectorised (each element is one IEEE operation).
#pragma once
#include <cstdint>

#include "base/dtype.h"

namespace dp::kernels::cpu {

enum class ReduceKind : uint8_t { Sum, Max, Min };

// dst[i] = a[i] op b[i] for i < n. dtype: f32, f16, bf16, f64 or i32 (others throw
// std::invalid_argument). dst may alias a or b.
//   f16/bf16: both operands widened to f32, combined in f32, rounded to nearest even.
//   i32 sum wraps around (two's complement), like NCCL and MPI in practice.
//   max/min: a NaN operand gives NaN (like torch.maximum), whichever side it is on.
void reduce(DType dtype, ReduceKind kind, void* dst, const void* a, const void* b, int64_t n);

// dst[i] = dst[i] / divisor for i < n: f32/f64 in their own precision, f16/bf16 in f32 then
// rounded, i32 truncated toward zero (C++ integer division).
void divide(DType dtype, void* dst, int64_t n, int divisor);

}  // namespace dp::kernels::cpu
