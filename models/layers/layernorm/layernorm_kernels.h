// defines: the CUDA twins of models/layers/layernorm/layernorm_ref.h, layer normalisation over the
// last dimension of (M, C) rows, on an explicit stream. x, y, dy, dx in dtype (F32, BF16 or F16:
// raw 16-bit bits), the parameters and their gradients f32 (LayerNorm's are never 16-bit). Every
// sum is f32 in a fixed order (a block's shared-memory tree per row; for the parameter gradients
// one thread per column and chunk of 64 rows, down the rows, then the chunks in order), so results
// are the same run to run; the CPU twin sums in f64. Straightforward rather than fast: one block
// of kThreads per row, two passes over it.
//
// Device pointers; M, C > 0 or nothing is launched (cudaSuccess); another dtype, M or C < 0, or
// eps <= 0 is cudaErrorInvalidValue. Returns the launch status (check with CHECK_CUDA).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "base/dtype.h"

namespace dp::kernels::cuda {

// The floats of layernorm_backward's scratch: 2 M + 2 C ceil(M / 64) (0 when M or C <= 0).
int64_t layernorm_backward_scratch_floats(int64_t M, int64_t C);

// y = (x - mean) / sqrt(var + eps) * w + b per row (biased variance; b null: no shift).
[[nodiscard]] cudaError_t layernorm_forward(DType dtype, void* y, const void* x, const float* w, const float* b,
                                            int64_t M, int64_t C, float eps, cudaStream_t stream);

// With xhat = (x - mean) * rstd and g = dy * w per row (statistics recomputed from x):
//   dx = rstd * (g - mean_c(g) - xhat * mean_c(g * xhat))   (dx null: not written)
//   dw += sum_m dy * xhat,  db += sum_m dy                   (db null: no bias)
// stats: device scratch of layernorm_backward_scratch_floats(M, C) floats (each row's mean and
// rstd, then the parameter sums' per-chunk partials; written here).
[[nodiscard]] cudaError_t layernorm_backward(DType dtype, void* dx, float* dw, float* db, const void* dy,
                                             const void* x, const float* w, int64_t M, int64_t C, float eps,
                                             float* stats, cudaStream_t stream);

}  // namespace dp::kernels::cuda
