// defines: the fused optimizer kernels, CUDA twins of kernels/cpu/optim_sgd.h and
// optim_adamw.h: one launch updates the whole flat f32 parameter arena (and its state) with
// the element functions the CPU twins run (kernels/optim_math.h), so the results equal the
// CPU's bit for bit, weight decay left out on the spans of DecaySkips (train.decay_params,
// kernels/optim_math.h: each element looks up its span); and ParamCopy16, the optional 16-bit copy of the updated parameters that
// the same pass writes under mixed precision.
//
// Returns the launch status (check with CHECK_CUDA). Device pointers of n elements. The passes
// move 16-byte vectors where the pointers' alignments allow (kernels/cuda/pass_shape.h).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/optim_math.h"

namespace dp::kernels::cuda {

// Mixed precision: the layers' 16-bit copy of the parameters (Graph's compute copy, the same
// layout as the f32 arena). With dst set, the step also writes dst[i] = the updated p[i] rounded
// to nearest even to bf16 (bf16 = true) or f16: the bits kernels/cuda/cast.h's f32_to_bf16 /
// f32_to_f16 would write over the arena afterwards, from the same pass (the parameter is read
// once per step instead of twice). dst may not alias p.
struct ParamCopy16 {
  uint16_t* dst = nullptr;  // null: no copy
  bool bf16 = true;
};

// p, buf updated; buf may be null only when s.momentum == 0 (else cudaErrorInvalidValue). skips:
// the spans without the decay term (its bounds in device memory; count 0: decay everywhere).
[[nodiscard]] cudaError_t sgd_step(float* p, const float* g, float* buf, int64_t n, const SgdScalars& s,
                                   cudaStream_t stream, ParamCopy16 copy = {}, DecaySkips skips = {});
// p, m, v updated.
[[nodiscard]] cudaError_t adamw_step(float* p, const float* g, float* m, float* v, int64_t n,
                                     const AdamWScalars& s, cudaStream_t stream, ParamCopy16 copy = {},
                                     DecaySkips skips = {});

}  // namespace dp::kernels::cuda
