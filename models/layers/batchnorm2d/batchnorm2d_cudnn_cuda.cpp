// BatchNorm2d's legacy cuDNN implementation (train.bn_impl = "cudnn", the default; also where the
// persistent call is ruled out or refused): cudnnBatchNormalizationForwardTraining /
// ForwardInference / Backward in CUDNN_BATCHNORM_SPATIAL mode, with the GPU plan's epilogue as
// our elementwise kernels around them (batchnorm2d_apply.h: y = relu(y [+ r]) in place after the
// forward; g = dy * (y > 0) before the backward, written straight into r's gradient when it is
// wanted).
//
// cuDNN's running variance: cudnnBatchNormalizationForwardTraining documents resultRunningVariance
// only as "the moving average of variance[x]" (factor applied as for the mean:
// running = factor * batch + (1 - factor) * running, so factor = torch's momentum). That the
// batch variance it averages is the unbiased one (M / (M - 1) times the biased variance the batch
// is normalised with) is what torch relies on, since torch's CUDA batch norm calls this very
// function and its running_var is unbiased (pytorch/pytorch#19902: "the cudnn version has the
// same [unbiased running variance]"), and MXNet measured it (apache/mxnet#21111: the cuDNN
// batchnorm's moving variance is the unbiased estimate, its own kernel's the biased one). The
// bn_train case of tests/models/test_cuda_layers.cpp compares the running statistics with the
// CPU twin's (which applies M / (M - 1) explicitly), so a GPU run checks it.
//
// Mode: CUDNN_BATCHNORM_SPATIAL for every dtype and layout here; the persistent mode is
// batchnorm2d_cudnn_ex_cuda.cpp's (train.bn_impl = "cudnn_ex").
#include "models/layers/batchnorm2d/batchnorm2d_apply.h"
#include "models/layers/batchnorm2d/batchnorm2d_gpu.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/exec_context.h"

namespace dp::models {

namespace {
const float kOne = 1.0f, kZero = 0.0f;  // cuDNN's blend factors are float for f32/f16/bf16 data

// y = relu(y [+ r]) after cuDNN's normalisation.
void epilogue_after(const BnCall& c) {
  if (c.relu()) CHECK_CUDA(kc::batchnorm_epilogue(c.y, c.r, c.dt, c.numel(), c.s));
}
}  // namespace

bool cudnn_forward_train(BnCudaState& st, const BnCall& c) {
  const auto& ds = st.descs_for(c.d, c.H, c.W, c.dt);
  const cudnnStatus_t r = cudnnBatchNormalizationForwardTraining(
      c.ctx.gpu->cudnn(), CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, ds.x.get(), c.x, ds.x.get(), c.y, ds.bn.get(), c.w,
      c.b, c.momentum, c.running_mean, c.running_var, c.eps, st.saved_mean.raw(), st.saved_invvar.raw());
  if (cudnn_status_is_not_supported(r)) return false;
  check_cudnn_status(r, "cudnnBatchNormalizationForwardTraining", __FILE__, __LINE__);
  epilogue_after(c);
  return true;
}

bool cudnn_forward_eval(BnCudaState& st, const BnCall& c) {
  const auto& ds = st.descs_for(c.d, c.H, c.W, c.dt);
  const cudnnStatus_t r = cudnnBatchNormalizationForwardInference(
      c.ctx.gpu->cudnn(), CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, ds.x.get(), c.x, ds.x.get(), c.y, ds.bn.get(), c.w,
      c.b, c.running_mean, c.running_var, c.eps);
  if (cudnn_status_is_not_supported(r)) return false;
  check_cudnn_status(r, "cudnnBatchNormalizationForwardInference", __FILE__, __LINE__);
  epilogue_after(c);
  return true;
}

bool cudnn_backward_train(BnCudaState& st, const BnCall& c) {
  const auto& ds = st.descs_for(c.d, c.H, c.W, c.dt);
  cuda::DeviceBuffer g_buf;
  const void* g = epilogue_gradient(c, g_buf);
  // dx overwritten (alpha 1, beta 0); weight and bias gradients accumulated (alpha 1, beta 1).
  void* dx = c.dx ? c.dx : grown(st.dx_scratch, static_cast<size_t>(c.numel()) * dtype_size(c.dt), st.device);
  const cudnnStatus_t r = cudnnBatchNormalizationBackward(
      c.ctx.gpu->cudnn(), CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, &kOne, &kOne, ds.x.get(), c.x, ds.x.get(), g,
      ds.x.get(), dx, ds.bn.get(), c.w, c.dw, c.db, c.eps, st.saved_mean.raw(), st.saved_invvar.raw());
  if (cudnn_status_is_not_supported(r)) return false;
  check_cudnn_status(r, "cudnnBatchNormalizationBackward", __FILE__, __LINE__);
  return true;
}

}  // namespace dp::models
