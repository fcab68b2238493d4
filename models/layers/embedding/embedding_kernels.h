// defines: the CUDA twin of models/layers/embedding/embedding_ref.h: the token embedding's gather
// and its deterministic scatter-add. The table and its gradient are f32; y and dy are in dtype
// (F32, BF16 or F16: raw 16-bit bits; another is cudaErrorInvalidValue): a 16-bit y is the row
// rounded to nearest even once, a 16-bit dy is widened before it is added. Bit for bit the CPU
// twin's results on the same values: the forward copies, the backward adds the rows in the twin's
// order (m ascending) with one thread owning each column d of a range of table rows, so no two
// threads touch one element and no atomics are used.
// Returns the launch status (check with CHECK_CUDA).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "base/dtype.h"

namespace dp::kernels::cuda {

// y (M, D) = w[ids[m], :]; w (V, D). An id outside [0, V) (the caller's to check, as for the CPU
// twin) makes its row NaN rather than reading out of bounds. M >= 0, D >= 1, V >= 1; else
// cudaErrorInvalidValue.
[[nodiscard]] cudaError_t embedding_forward(DType dtype, void* y, const int32_t* ids, const float* w, int64_t M,
                                            int64_t V, int64_t D, cudaStream_t stream);

// dw (V, D) += dy[m, :] at row ids[m], m in order (ids outside [0, V) skipped).
// D x R threads (R id ranges), each walking all M ids and adding the rows of its range: the table
// gradient the position embedding shares (table_grad.cuh).
[[nodiscard]] cudaError_t embedding_backward(DType dtype, float* dw, const int32_t* ids, const void* dy, int64_t M,
                                             int64_t V, int64_t D, cudaStream_t stream);

}  // namespace dp::kernels::cuda
