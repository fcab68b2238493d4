// AdamW's GPU step (runtime/optim/adamw.h), writing the 16-bit compute copy too when it has one.
#include "runtime/optim/adamw.h"

#include "kernels/cuda/optim.h"
#include "runtime/cuda/check.h"

namespace dp::optim {

void AdamW::step_device(float* p, const float* g, int64_t state_begin, int64_t n, const kernels::AdamWScalars& s,
                        Copy16 copy16, const kernels::DecaySkips& skips) {
  const kernels::cuda::ParamCopy16 copy{static_cast<uint16_t*>(copy16.dst), copy16.bf16};
  CHECK_CUDA(kernels::cuda::adamw_step(p, g, static_cast<float*>(exp_avg_.raw()) + state_begin,
                                       static_cast<float*>(exp_avg_sq_.raw()) + state_begin, n, s,
                                       static_cast<cudaStream_t>(stream_), copy, skips));
}

}  // namespace dp::optim
