// BatchNorm2d's persistent cuDNN implementation (train.bn_impl = "cudnn_ex"):
// cudnnBatchNormalizationForwardTrainingEx / BackwardEx in CUDNN_BATCHNORM_SPATIAL_PERSISTENT
// mode, NHWC 16-bit data, with the GPU plan's epilogue fused through bnOps
// (CUDNN_BATCHNORM_OPS_BN_ACTIVATION: y = relu(bn(x)); _BN_ADD_ACTIVATION: y = relu(bn(x) + z))
// where bn_ex_choice (batchnorm2d_ex_guard.h) allows it. These calls are marked deprecated in
// cuDNN 9.19's cudnn_ops.h: they are here to be measured against the legacy call and our kernels
// (docs/cuda.md), and stay only if they win.
//
// Workspace: the sizes cuDNN's cudnnGet*WorkspaceSize report, from the execution context's
// bounded workspace (train.workspace_mb); more than that bound is treated as unsupported. The
// reserve space (cudnnGetBatchNormalizationTrainingExReserveSpaceSize: what the backward needs of
// the forward, e.g. the activation's mask) is the layer's own, kept from forward to backward.
// Saved mean and 1/std: the same arrays the legacy call fills, so a backward that cuDNN refuses
// here falls back to the legacy backward with them.
#include "models/layers/batchnorm2d/batchnorm2d_apply.h"
#include "models/layers/batchnorm2d/batchnorm2d_gpu.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/exec_context.h"
#include "runtime/log.h"

namespace dp::models {

DP_CUDA_DESTROY(DestroyActivationDesc, cudnnDestroyActivationDescriptor);

// The ReLU activation descriptor the fused ops take (one per layer).
struct BnExState {
  cuda::Owner<cudnnActivationDescriptor_t, DestroyActivationDesc> relu;
  BnExState() {
    cudnnActivationDescriptor_t d = nullptr;
    CHECK_CUDNN(cudnnCreateActivationDescriptor(&d));
    relu = cuda::Owner<cudnnActivationDescriptor_t, DestroyActivationDesc>(d);
    CHECK_CUDNN(cudnnSetActivationDescriptor(d, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  }
};

namespace {
const float kOne = 1.0f, kZero = 0.0f;
constexpr cudnnBatchNormMode_t kMode = CUDNN_BATCHNORM_SPATIAL_PERSISTENT;

cudnnBatchNormOps_t cudnn_ops(BnExOps ops) {
  switch (ops) {
    case BnExOps::Bn: return CUDNN_BATCHNORM_OPS_BN;
    case BnExOps::BnActivation: return CUDNN_BATCHNORM_OPS_BN_ACTIVATION;
    case BnExOps::BnAddActivation: return CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION;
  }
  return CUDNN_BATCHNORM_OPS_BN;
}

cudnnActivationDescriptor_t activation(BnCudaState& st, BnExOps ops) {
  if (ops == BnExOps::Bn) return nullptr;
  if (!st.ex) st.ex.emplace();
  return st.ex->relu.get();
}

// Scratch of `bytes` from the context's bounded workspace; null (and a log line) above the bound.
bool workspace(const BnCall& c, size_t bytes, void** ws, const char* what) {
  if (bytes > c.ctx.gpu->workspace_limit()) {
    log::get("cuda")->warn("{}: cuDNN's persistent batch norm {} wants {} bytes of workspace, above "
                           "train.workspace_mb ({} bytes)",
                           c.layer, what, bytes, c.ctx.gpu->workspace_limit());
    return false;
  }
  *ws = c.ctx.gpu->workspace(bytes);
  return true;
}
}  // namespace

bool cudnn_ex_forward_train(BnCudaState& st, const BnCall& c, const BnExChoice& ex) {
  const auto& ds = st.descs_for(c.d, c.H, c.W, c.dt);
  const cudnnHandle_t h = c.ctx.gpu->cudnn();
  const cudnnBatchNormOps_t ops = cudnn_ops(ex.ops);
  const cudnnActivationDescriptor_t act = activation(st, ex.ops);
  const bool add = ex.ops == BnExOps::BnAddActivation;
  const cudnnTensorDescriptor_t zdesc = add ? ds.x.get() : nullptr;
  size_t ws_bytes = 0, reserve_bytes = 0;
  cudnnStatus_t r = cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(h, kMode, ops, ds.x.get(), zdesc,
                                                                              ds.x.get(), ds.bn.get(), act, &ws_bytes);
  if (cudnn_status_is_not_supported(r)) return false;
  check_cudnn_status(r, "cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize", __FILE__, __LINE__);
  r = cudnnGetBatchNormalizationTrainingExReserveSpaceSize(h, kMode, ops, act, ds.x.get(), &reserve_bytes);
  if (cudnn_status_is_not_supported(r)) return false;
  check_cudnn_status(r, "cudnnGetBatchNormalizationTrainingExReserveSpaceSize", __FILE__, __LINE__);
  void* ws = nullptr;
  if (!workspace(c, ws_bytes, &ws, "forward")) return false;
  void* reserve = reserve_bytes ? grown(st.reserve, reserve_bytes, st.device) : nullptr;
  r = cudnnBatchNormalizationForwardTrainingEx(h, kMode, ops, &kOne, &kZero, ds.x.get(), c.x, zdesc,
                                               add ? c.r : nullptr, ds.x.get(), c.y, ds.bn.get(), c.w, c.b,
                                               c.momentum, c.running_mean, c.running_var, c.eps, st.saved_mean.raw(),
                                               st.saved_invvar.raw(), act, ws, ws_bytes, reserve, reserve_bytes);
  if (cudnn_status_is_not_supported(r)) return false;
  check_cudnn_status(r, "cudnnBatchNormalizationForwardTrainingEx", __FILE__, __LINE__);
  if (ex.own_epilogue && c.relu()) CHECK_CUDA(kc::batchnorm_epilogue(c.y, c.r, c.dt, c.numel(), c.s));
  st.last.reserve_bytes = reserve_bytes;
  return true;
}

bool cudnn_ex_backward_train(BnCudaState& st, const BnCall& c) {
  const BnExChoice& ex = st.last.ex;
  const auto& ds = st.descs_for(c.d, c.H, c.W, c.dt);
  const cudnnHandle_t h = c.ctx.gpu->cudnn();
  const cudnnBatchNormOps_t ops = cudnn_ops(ex.ops);
  const cudnnActivationDescriptor_t act = activation(st, ex.ops);
  const bool fused = ex.ops != BnExOps::Bn, add = ex.ops == BnExOps::BnAddActivation;
  // An epilogue cuDNN did not fuse: its gradient first (g into r's gradient where wanted).
  cuda::DeviceBuffer g_buf, dz_buf;
  const void* dy = ex.own_epilogue ? epilogue_gradient(c, g_buf) : c.dy;
  void* dz = nullptr;
  if (add) {
    dz = c.dr;
    if (!dz) {
      dz_buf = cuda::DeviceBuffer(static_cast<size_t>(c.numel()) * dtype_size(c.dt), c.s);
      dz = dz_buf.data();
    }
  }
  void* dx = c.dx ? c.dx : grown(st.dx_scratch, static_cast<size_t>(c.numel()) * dtype_size(c.dt), st.device);
  const cudnnTensorDescriptor_t ydesc = fused ? ds.x.get() : nullptr, dzdesc = add ? ds.x.get() : nullptr;
  size_t ws_bytes = 0;
  cudnnStatus_t r = cudnnGetBatchNormalizationBackwardExWorkspaceSize(h, kMode, ops, ds.x.get(), ydesc, ds.x.get(),
                                                                       dzdesc, ds.x.get(), ds.bn.get(), act, &ws_bytes);
  if (cudnn_status_is_not_supported(r)) return false;
  check_cudnn_status(r, "cudnnGetBatchNormalizationBackwardExWorkspaceSize", __FILE__, __LINE__);
  void* ws = nullptr;
  if (!workspace(c, ws_bytes, &ws, "backward")) return false;
  // dx overwritten (alpha 1, beta 0); weight and bias gradients accumulated (alpha 1, beta 1).
  r = cudnnBatchNormalizationBackwardEx(h, kMode, ops, &kOne, &kZero, &kOne, &kOne, ds.x.get(), c.x, ydesc,
                                        fused ? c.y : nullptr, ds.x.get(), dy, dzdesc, dz, ds.x.get(), dx, ds.bn.get(),
                                        c.w, fused ? c.b : nullptr, c.dw, c.db, c.eps, st.saved_mean.raw(),
                                        st.saved_invvar.raw(), act, ws, ws_bytes,
                                        st.last.reserve_bytes ? st.reserve.raw() : nullptr, st.last.reserve_bytes);
  if (cudnn_status_is_not_supported(r)) return false;
  check_cudnn_status(r, "cudnnBatchNormalizationBackwardEx", __FILE__, __LINE__);
  return true;
}

}  // namespace dp::models
