// AdamW's GPU step (runtime/optim/adamw.h), writing the 16-bit compute copy too when it has one.
#include "runtime/optim/adamw.h"

#include "kernels/cuda/optim.h"
#include "runtime/cuda/check.h"

namespace dp::optim {

void AdamW::step_device(const Tensor& params, const Tensor& grads, const kernels::AdamWScalars& s) {
  const kernels::cuda::ParamCopy16 copy{static_cast<uint16_t*>(copy_data()), copy_is_bf16()};
  CHECK_CUDA(kernels::cuda::adamw_step(static_cast<float*>(params.raw()), static_cast<const float*>(grads.raw()),
                                       static_cast<float*>(exp_avg_.raw()), static_cast<float*>(exp_avg_sq_.raw()),
                                       numel_, s, static_cast<cudaStream_t>(stream_), copy,
                                       decay_skips()));
}

}  // namespace dp::optim
