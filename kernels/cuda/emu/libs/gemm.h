// defines: the emulated BLAS's one product (cublasGemmEx and cublasLtMatmul both run it): a
// column-major op(A) op(B) over f32/bf16/f16 memory, summed in f32.
#pragma once
#include <cstdint>
#include <vector>

#include <library_types.h>

namespace dp::emu::libs {

// A column-major operand as the GEMM reads it: its memory, element type, leading dimension and
// whether it is read transposed (op(X)(r, c) = X(c, r)).
struct Operand {
  const void* p = nullptr;
  cudaDataType_t type = CUDA_R_32F;
  int64_t ld = 0;
  bool trans = false;
};

// acc (m x n, column-major, ld m): acc(i, j) = sum over p < k of op(A)(i, p) op(B)(p, j), in f32
// in the order of p; with tf32 every input is first rounded to TF32's 10-bit mantissa (nearest,
// ties away), as the tensor cores' TF32 mode reads f32 data.
std::vector<float> column_major_product(int64_t m, int64_t n, int64_t k, const Operand& a, const Operand& b,
                                        bool tf32);

}  // namespace dp::emu::libs
