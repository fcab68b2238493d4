// defines: the CUDA twins of models/layers/dropout/dropout_ref.h, inverted dropout (f32; bf16/f16 through the
// typed entries) with the counter-based mask: element i is kept iff word i % 4 of Philox block i / 4 of (seed, stream) passes
// (base/philox.h; the decision kernels/cuda/dropout_keep.h), so the mask equals the CPU twin's for the same (seed, stream, i) —
// the layer derives stream from (step, layer name) — and the backward recomputes it.
//
// Returns the launch status (check with CHECK_CUDA). Device pointers; p in [0, 1), else
// cudaErrorInvalidValue. Equal to the CPU twin bit for bit.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "base/dtype.h"

namespace dp::kernels::cuda {

// y (n) = keep ? x * float(1 / (1 - p)) : 0
[[nodiscard]] cudaError_t dropout_forward(float* y, const float* x, int64_t n, double p, uint64_t seed,
                                          uint64_t stream_id, cudaStream_t stream);
// dx (n) = keep ? dy * float(1 / (1 - p)) : 0
[[nodiscard]] cudaError_t dropout_backward(float* dx, const float* dy, int64_t n, double p, uint64_t seed,
                                           uint64_t stream_id, cudaStream_t stream);

// Typed entry points: dtype F32 (the kernels above), BF16 or F16 (raw 16-bit bits), else
// cudaErrorInvalidValue. The mask is the same for every dtype (it depends on the index alone);
// a kept 16-bit element is widened to f32, multiplied by the f32 scale and rounded to nearest
// even once.
[[nodiscard]] cudaError_t dropout_forward(DType dtype, void* y, const void* x, int64_t n, double p, uint64_t seed,
                                          uint64_t stream_id, cudaStream_t stream);
[[nodiscard]] cudaError_t dropout_backward(DType dtype, void* dx, const void* dy, int64_t n, double p,
                                           uint64_t seed, uint64_t stream_id, cudaStream_t stream);

// The same over a 4-D [N, C, H, W] tensor stored NHWC (channels last): element i of the logical
// NCHW order gets mask word i, as in the CPU twin, wherever it lies in memory.
[[nodiscard]] cudaError_t dropout_forward_nhwc(DType dtype, void* y, const void* x, int64_t N, int64_t C, int64_t H,
                                               int64_t W, double p, uint64_t seed, uint64_t stream_id,
                                               cudaStream_t stream);
[[nodiscard]] cudaError_t dropout_backward_nhwc(DType dtype, void* dx, const void* dy, int64_t N, int64_t C,
                                                int64_t H, int64_t W, double p, uint64_t seed, uint64_t stream_id,
                                                cudaStream_t stream);

}  // namespace dp::kernels::cuda
