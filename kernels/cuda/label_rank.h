// defines: label_ranks on the device: each row's true-class rank among its scores, so that
// training and evaluation count top-1 / top-5 hits (token accuracy for language models) without
// copying the logits (N, T, V) to the host. CUDA twin of kernels/cpu/label_rank.h, equal bit for
// bit.
//
// Returns the launch status (check with CHECK_CUDA). Device pointers.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace dp::kernels::cuda {

// As cpu::label_ranks: out[r] = min(cap, #{k : z[r, k] > z[r, y[r]]}); cap for a label outside
// [0, K). ld: z's row stride (0: K; else >= K, its columns [K, ld) padding, never read). rows >= 0,
// K >= 1, cap >= 1, ld 0 or >= K (else cudaErrorInvalidValue).
[[nodiscard]] cudaError_t label_ranks(const float* z, const int32_t* y, int64_t rows, int64_t K, int32_t cap,
                                      int32_t* out, cudaStream_t stream, int64_t ld = 0);

}  // namespace dp::kernels::cuda
