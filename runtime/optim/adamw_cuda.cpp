// AdamW's GPU step (runtime/optim/adamw.h).
#include "runtime/optim/adamw.h"

#include "kernels/cuda/optim.h"
#include "runtime/cuda/check.h"

namespace dp::optim {

void AdamW::step_device(const Tensor& params, const Tensor& grads, const kernels::AdamWScalars& s) {
  CHECK_CUDA(kernels::cuda::adamw_step(static_cast<float*>(params.raw()), static_cast<const float*>(grads.raw()),
                                       static_cast<float*>(exp_avg_.raw()), static_cast<float*>(exp_avg_sq_.raw()),
                                       numel_, s, decay_skips(), static_cast<cudaStream_t>(stream_)));
}

}  // namespace dp::optim
