// Sgd's GPU step (runtime/optim/sgd.h), writing the 16-bit compute copy too when it has one.
#include "runtime/optim/sgd.h"

#include "kernels/cuda/optim.h"
#include "runtime/cuda/check.h"

namespace dp::optim {

void Sgd::step_device(float* p, const float* g, float* buf, int64_t n, const kernels::SgdScalars& s, Copy16 copy16,
                      const kernels::DecaySkips& skips) {
  const kernels::cuda::ParamCopy16 copy{static_cast<uint16_t*>(copy16.dst), copy16.bf16};
  CHECK_CUDA(kernels::cuda::sgd_step(p, g, buf, n, s, static_cast<cudaStream_t>(stream_), copy, skips));
}

}  // namespace dp::optim
