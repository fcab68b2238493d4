// Sgd's GPU step (runtime/optim/sgd.h).
#include "runtime/optim/sgd.h"

#include "kernels/cuda/optim.h"
#include "runtime/cuda/check.h"

namespace dp::optim {

void Sgd::step_device(const Tensor& params, const Tensor& grads, float* buf, const kernels::SgdScalars& s) {
  CHECK_CUDA(kernels::cuda::sgd_step(static_cast<float*>(params.raw()), static_cast<const float*>(grads.raw()), buf,
                                     numel_, s, decay_skips(), static_cast<cudaStream_t>(stream_)));
}

}  // namespace dp::optim
