// Sgd's GPU step (runtime/optim/sgd.h), writing the 16-bit compute copy too when it has one.
#include "runtime/optim/sgd.h"

#include "kernels/cuda/optim.h"
#include "runtime/cuda/check.h"

namespace dp::optim {

void Sgd::step_device(const Tensor& params, const Tensor& grads, float* buf, const kernels::SgdScalars& s) {
  const kernels::cuda::ParamCopy16 copy{static_cast<uint16_t*>(copy_data()), copy_is_bf16()};
  CHECK_CUDA(kernels::cuda::sgd_step(static_cast<float*>(params.raw()), static_cast<const float*>(grads.raw()), buf,
                                     numel_, s, static_cast<cudaStream_t>(stream_), copy,
                                     decay_skips()));
}

}  // namespace dp::optim
