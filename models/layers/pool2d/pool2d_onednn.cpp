// Pool2dLayer's oneDNN path (maxpool2d, avgpool2d): kernels/cpu/onednn_pool.h on f32 under
// CpuBackend::OneDnn, NHWC under ctx.channels_last; otherwise the layer's reference kernels.
#include "models/layers/common.h"
#include "models/layers/pool2d/pool2d_common.h"

namespace dp::models {

namespace {
kernels::cpu::onednn::PoolGeometry pool_geometry(const kernels::cpu::Pool2dDims& d, bool nhwc, bool max) {
  return {d.N, d.C, d.H, d.W, d.K, d.K, d.stride, d.pad, d.OH, d.OW, nhwc, max};
}
}  // namespace

kernels::cpu::onednn::OnednnPool& Pool2dLayer::onednn_pool() {
  if (!dnnl_) dnnl_ = std::make_unique<kernels::cpu::onednn::OnednnPool>(layer_str(*this));
  return *dnnl_;
}

// Max pooling's workspace in the step plan's kept bytes (backward_needs), or null: the pool's own.
void* Pool2dLayer::planned_workspace(const StepContext& ctx, const kernels::cpu::onednn::PoolGeometry& g) {
  const size_t bytes = onednn_pool().workspace_bytes(g);
  if (bytes == 0) return nullptr;
  const Tensor kept = ctx.mem.kept({static_cast<int64_t>(bytes)}, DType::U8);
  return kept.defined() ? kept.raw() : nullptr;
}

bool Pool2dLayer::forward_onednn(const StepContext& ctx, const Tensor& x, Tensor& y, const kernels::cpu::Pool2dDims& d) {
  if (!use_onednn(ctx, x.dtype())) {
    check_reference_layout(*this, ctx, x);
    return false;
  }
  const kernels::cpu::onednn::PoolGeometry g = pool_geometry(d, is_channels_last(ctx, x), kind() == PoolKind::Max);
  onednn_pool().forward(g, x.data<float>(), y.data<float>(), ctx.step, planned_workspace(ctx, g));
  return true;
}

bool Pool2dLayer::backward_onednn(const StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor& dx,
                                  const kernels::cpu::Pool2dDims& d) {
  if (!use_onednn(ctx, x.dtype())) {
    check_reference_layout(*this, ctx, x);
    return false;
  }
  const kernels::cpu::onednn::PoolGeometry g = pool_geometry(d, is_channels_last(ctx, x), kind() == PoolKind::Max);
  onednn_pool().backward(g, x.data<float>(), dy.data<float>(), dx.data<float>(), ctx.step, planned_workspace(ctx, g));
  return true;
}

}  // namespace dp::models
