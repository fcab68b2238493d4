// Pool2dLayer's GPU path (maxpool2d, avgpool2d) through cuDNN pooling; the CPU reference is
// kernels/cpu/pool2d.h, and pool2d_common.h says what each mode computes.
#include "models/layers/pool2d/pool2d_common.h"

#include <compare>
#include <limits>
#include <map>

#include "models/layers/common.h"
#include "runtime/cuda/cudnn_desc.h"
#include "runtime/cuda/exec_context.h"
#include "runtime/cuda/check.h"

namespace dp::models {

struct Pool2dLayer::CudaState {
  struct Key {
    int64_t n;
    DType dtype;
    bool nhwc;
    auto operator<=>(const Key&) const = default;
  };
  struct Descs {
    cuda::TensorDesc x;  // x, dx (N, C, H, W)
    cuda::TensorDesc y;  // y, dy (N, C, OH, OW)
  };
  cuda::PoolDesc pool;
  std::map<Key, Descs> descs;

  explicit CudaState(PoolKind kind, const kernels::cpu::Pool2dDims& d) {
    pool.set(kind == PoolKind::Max ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING,
             d.K, d.stride, d.pad);
  }

  const Descs& descs_for(const kernels::cpu::Pool2dDims& d, DType dtype, bool nhwc, const Layer& layer) {
    const Key key{d.N, dtype, nhwc};
    auto it = descs.find(key);
    if (it != descs.end()) return it->second;
    Descs ds;
    ds.x.set(dtype, d.N, d.C, d.H, d.W, nhwc);
    ds.y.set(dtype, d.N, d.C, d.OH, d.OW, nhwc);
    // cuDNN sizes the output in floor mode, as the layer does; say so if it ever disagrees.
    int n = 0, c = 0, h = 0, w = 0;
    CHECK_CUDNN(cudnnGetPooling2dForwardOutputDim(pool.get(), ds.x.get(), &n, &c, &h, &w));
    DP_CHECK(n == d.N && c == d.C && h == d.OH && w == d.OW, "{}: cuDNN pools [{}, {}, {}, {}] into [{}, {}, {}, {}], "
             "the layer into [{}, {}, {}, {}]", layer_str(layer), d.N, d.C, d.H, d.W, n, c, h, w, d.N, d.C, d.OH, d.OW);
    return descs.emplace(key, std::move(ds)).first->second;
  }
};

void Pool2dLayer::forward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) {
  DP_CHECK(ctx.gpu != nullptr, "{}: GPU tensors without a GPU context (StepContext::gpu)", layer_str(*this));
  kernels::cpu::Pool2dDims d = d_;
  d.N = x[0].dim(0);
  check_gpu_tensor(*this, x[0], ctx.compute, {d.N, d.C, d.H, d.W}, "input");
  check_gpu_tensor(*this, y, ctx.compute, {d.N, d.C, d.OH, d.OW}, "output");
  if (!cuda_) cuda_.emplace(kind(), d_);
  const auto& ds = cuda_->descs_for(d, ctx.compute, is_channels_last(ctx, x[0]), *this);
  const float one = 1.0f, zero = 0.0f;  // float blend factors for f32/f16/bf16 data
  CHECK_CUDNN(cudnnPoolingForward(ctx.gpu->cudnn(), cuda_->pool.get(), &one, ds.x.get(), x[0].raw(), &zero,
                                  ds.y.get(), y.raw()));
}

void Pool2dLayer::backward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor& y,
                                const Tensor& dy, std::vector<Tensor>& dx) {
  if (!dx[0].defined()) return;
  DP_CHECK(ctx.gpu != nullptr, "{}: GPU tensors without a GPU context (StepContext::gpu)", layer_str(*this));
  kernels::cpu::Pool2dDims d = d_;
  d.N = x[0].dim(0);
  check_gpu_tensor(*this, x[0], ctx.compute, {d.N, d.C, d.H, d.W}, "input");
  check_gpu_tensor(*this, y, ctx.compute, {d.N, d.C, d.OH, d.OW}, "output");
  check_gpu_tensor(*this, dy, ctx.compute, {d.N, d.C, d.OH, d.OW}, "output gradient");
  check_gpu_tensor(*this, dx[0], ctx.compute, {d.N, d.C, d.H, d.W}, "input gradient");
  if (!cuda_) cuda_.emplace(kind(), d_);
  const auto& ds = cuda_->descs_for(d, ctx.compute, is_channels_last(ctx, x[0]), *this);
  const float one = 1.0f, zero = 0.0f;  // dx overwritten (beta 0)
  CHECK_CUDNN(cudnnPoolingBackward(ctx.gpu->cudnn(), cuda_->pool.get(), &one, ds.y.get(), y.raw(), ds.y.get(),
                                   dy.raw(), ds.x.get(), x[0].raw(), &zero, ds.x.get(), dx[0].raw()));
}

}  // namespace dp::models
