// defines: the fused optimizer kernels, CUDA twins of kernels/cpu/optim_sgd.h and
// optim_adamw.h: one launch updates the whole flat f32 parameter arena (and its state) with
// the element functions the CPU twins run (kernels/optim_math.h), so the results equal the
// CPU's bit for bit.
//
// Returns the launch status (check with CHECK_CUDA). Device pointers of n elements.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/optim_math.h"

namespace dp::kernels::cuda {

// p, buf updated; buf may be null only when s.momentum == 0 (else cudaErrorInvalidValue).
[[nodiscard]] cudaError_t sgd_step(float* p, const float* g, float* buf, int64_t n, const SgdScalars& s,
                                   cudaStream_t stream);
// p, m, v updated.
[[nodiscard]] cudaError_t adamw_step(float* p, const float* g, float* m, float* v, int64_t n,
                                     const AdamWScalars& s, cudaStream_t stream);
// The same, without the decay term on the elements of `skips` (its bounds in device memory): one
// launch over the whole arena, each element looking up its span (kernels/optim_math.h).
[[nodiscard]] cudaError_t sgd_step(float* p, const float* g, float* buf, int64_t n, const SgdScalars& s,
                                   const DecaySkips& skips, cudaStream_t stream);
[[nodiscard]] cudaError_t adamw_step(float* p, const float* g, float* m, float* v, int64_t n,
                                     const AdamWScalars& s, const DecaySkips& skips, cudaStream_t stream);

}  // namespace dp::kernels::cuda
