// defines: the CUDA twins of models/layers/position_embedding/position_embedding_ref.h: the
// broadcast add of a learned position table over the batch and its reduction, on an explicit
// stream. x, y, dy in dtype (F32, BF16 or F16: raw 16-bit bits), the table and its gradient f32.
// The reduction runs one thread per (t, c) down the batch in order: the same bits run to run
// (the token embedding's table gradient, models/layers/embedding/table_grad.cuh, with row t of
// dy row n T + t).
//
// Device pointers; N, Tn, C >= 0 (any 0: nothing launched, cudaSuccess), another dtype or a
// negative size is cudaErrorInvalidValue. Returns the launch status (check with CHECK_CUDA).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "base/dtype.h"

namespace dp::kernels::cuda {

// y (N, Tn, C) = x + w[t, :] (each sum in f32, rounded once); y may alias x.
[[nodiscard]] cudaError_t position_embedding_forward(DType dtype, void* y, const void* x, const float* w, int64_t N,
                                                     int64_t Tn, int64_t C, cudaStream_t stream);
// dw[t, :] += dy[n, t, :] for n in order (each addition onto the running f32 value, as the twin).
[[nodiscard]] cudaError_t position_embedding_backward(DType dtype, float* dw, const void* dy, int64_t N, int64_t Tn,
                                                      int64_t C, cudaStream_t stream);

}  // namespace dp::kernels::cuda
