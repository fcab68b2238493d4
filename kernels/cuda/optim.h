// defines: the fused optimizer kernels, CUDA twins of kernels/cpu/optim_sgd.h and
// optim_adamw.h: one launch updates the whole flat f32 parameter arena (and its state) with
// the CPU twins' scalars, formulas and order of operations (kernels/cuda/optim_math.h), so the
// results equal the CPU's bit for bit.
//
// Returns the launch status (check with CHECK_CUDA). Device pointers of n elements.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cpu/optim_adamw.h"
#include "kernels/cpu/optim_sgd.h"

namespace dp::kernels::cuda {

// p, buf updated; buf may be null only when s.momentum == 0 (else cudaErrorInvalidValue).
[[nodiscard]] cudaError_t sgd_step(float* p, const float* g, float* buf, int64_t n, const cpu::SgdScalars& s,
                                   cudaStream_t stream);
// p, m, v updated.
[[nodiscard]] cudaError_t adamw_step(float* p, const float* g, float* m, float* v, int64_t n,
                                     const cpu::AdamWScalars& s, cudaStream_t stream);

}  // namespace dp::kernels::cuda
