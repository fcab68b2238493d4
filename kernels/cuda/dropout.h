// defines: the CUDA twins of kernels/cpu/dropout.h, f32 inverted dropout with the counter-based
// mask: element i is kept iff word i % 4 of Philox block i / 4 of (seed, stream) passes
// (kernels/cuda/philox.h), so the mask equals the CPU twin's for the same (seed, stream, i) —
// the layer derives stream from (step, layer name) — and the backward recomputes it.
//
// Returns the launch status (check with CHECK_CUDA). Device pointers; p in [0, 1), else
// cudaErrorInvalidValue. Equal to the CPU twin bit for bit.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace dp::kernels::cuda {

// y (n) = keep ? x * float(1 / (1 - p)) : 0
[[nodiscard]] cudaError_t dropout_forward(float* y, const float* x, int64_t n, double p, uint64_t seed,
                                          uint64_t stream_id, cudaStream_t stream);
// dx (n) = keep ? dy * float(1 / (1 - p)) : 0
[[nodiscard]] cudaError_t dropout_backward(float* dx, const float* dy, int64_t n, double p, uint64_t seed,
                                           uint64_t stream_id, cudaStream_t stream);

}  // namespace dp::kernels::cuda
