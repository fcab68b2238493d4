// defines: the CUDA twin of models/layers/embedding/embedding_ref.h: the token embedding's gather
// and its deterministic scatter-add, f32. Bit for bit the CPU twin's results: the forward copies,
// the backward adds the rows in the twin's order (m ascending) with one thread owning each column
// d of the whole table, so no two threads touch one element and no atomics are used.
// Returns the launch status (check with CHECK_CUDA).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace dp::kernels::cuda {

// y (M, D) = w[ids[m], :]; w (V, D). An id outside [0, V) (the caller's to check, as for the CPU
// twin) makes its row NaN rather than reading out of bounds. M >= 0, D >= 1, V >= 1; else
// cudaErrorInvalidValue.
[[nodiscard]] cudaError_t embedding_forward(float* y, const int32_t* ids, const float* w, int64_t M, int64_t V,
                                            int64_t D, cudaStream_t stream);

// dw (V, D) += dy[m, :] at row ids[m], m in order (ids outside [0, V) skipped).
// Straightforward: D threads, each walking all M rows.
[[nodiscard]] cudaError_t embedding_backward(float* dw, const int32_t* ids, const float* dy, int64_t M, int64_t V,
                                             int64_t D, cudaStream_t stream);

}  // namespace dp::kernels::cuda
