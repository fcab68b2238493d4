// BatchNorm2d's own-kernel implementation (train.bn_impl = "own"; also the eval backward and the
// fallback of the cuDNN paths): batchnorm2d_reduce.h's one-pass statistics and backward sums,
// batchnorm2d_apply.h's normalisation and input gradient with the epilogue fused in. Forward: two
// reads of x, one write of y (plus r under AddRelu). Backward: two reads of dy and x (and of y
// for the ReLU's mask), one write of dx (and of r's gradient).
#include "models/layers/batchnorm2d/batchnorm2d_apply.h"
#include "models/layers/batchnorm2d/batchnorm2d_gpu.h"
#include "models/layers/batchnorm2d/batchnorm2d_reduce.h"
#include "runtime/cuda/check.h"

namespace dp::models {

namespace {
void* reduce_scratch(BnCudaState& st, const BnCall& c, size_t* bytes) {
  *bytes = kc::batchnorm_reduce_scratch_bytes(c.d, c.dt);
  return grown(st.own_scratch, *bytes, st.device);
}
}  // namespace

void own_statistics(BnCudaState& st, const BnCall& c, bool update_running) {
  size_t bytes = 0;
  void* scratch = reduce_scratch(st, c, &bytes);
  CHECK_CUDA(kc::batchnorm_welford_stats(st.own_mean(), st.own_invstd(), st.own_scale(), c.running_mean,
                                         c.running_var, c.x, c.dt, c.w, c.d, c.momentum, c.eps, update_running,
                                         scratch, bytes, c.s));
}

void own_forward_train(BnCudaState& st, const BnCall& c) {
  own_statistics(st, c, /*update_running=*/true);
  CHECK_CUDA(kc::batchnorm_apply(c.y, c.x, c.r, c.relu(), c.dt, st.own_mean(), st.own_scale(), c.b, c.d, c.s));
}

void own_running_coefficients(BnCudaState& st, const BnCall& c) {
  CHECK_CUDA(kc::batchnorm_running_stats(st.mean.data<double>(), st.invstd.data<double>(), c.running_mean,
                                         c.running_var, c.eps, c.d.C, c.s));
  CHECK_CUDA(kc::batchnorm_coefficients(st.own_mean(), st.own_invstd(), st.own_scale(), st.mean.data<double>(),
                                        st.invstd.data<double>(), c.w, c.d.C, c.s));
}

void own_forward_eval(BnCudaState& st, const BnCall& c) {
  own_running_coefficients(st, c);
  CHECK_CUDA(kc::batchnorm_apply(c.y, c.x, c.r, c.relu(), c.dt, st.own_mean(), st.own_scale(), c.b, c.d, c.s));
}

void own_backward(BnCudaState& st, const BnCall& c, bool batch_stats) {
  size_t bytes = 0;
  void* scratch = reduce_scratch(st, c, &bytes);
  const void* relu_y = c.relu() ? c.y : nullptr;
  CHECK_CUDA(kc::batchnorm_backward_reduce(c.dw, c.db, st.own_k(), st.own_c1(), st.own_c2(), c.dy, relu_y, c.x, c.dt,
                                           st.own_mean(), st.own_invstd(), c.w, batch_stats, c.d, scratch, bytes,
                                           c.s));
  if (c.dx || c.dr)
    CHECK_CUDA(kc::batchnorm_backward_apply(c.dx, c.dr, c.dy, relu_y, c.x, c.dt, st.own_mean(), st.own_k(),
                                            st.own_c1(), st.own_c2(), c.d, c.s));
}

}  // namespace dp::models
