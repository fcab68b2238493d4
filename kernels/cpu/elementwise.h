// defines: CPU reference elementwise kernels (raw pointers, no tensors).
#pragma once
#include <cstdint>

namespace dp::kernels::cpu {

// dst[i] += src[i]
void add_inplace(float* dst, const float* src, int64_t n);
void add_inplace(double* dst, const double* src, int64_t n);

}  // namespace dp::kernels::cpu
