// GlobalAvgPool's oneDNN path: an average pooling whose window is the whole H x W plane
// (kernels/cpu/onednn_pool.h), on f32 under CpuBackend::OneDnn, NHWC under ctx.channels_last.
// y and dy [N, C, 1, 1] are the same memory in either layout.
#include "models/layers/common.h"
#include "models/layers/global_avgpool/global_avgpool.h"

namespace dp::models {

namespace {
kernels::cpu::onednn::PoolGeometry plane_geometry(int64_t N, int64_t C, int64_t H, int64_t W, bool nhwc) {
  return {N, C, H, W, H, W, 1, 0, 1, 1, nhwc, /*max=*/false};
}
}  // namespace

bool GlobalAvgPool::forward_onednn(const StepContext& ctx, const Tensor& x, Tensor& y) {
  if (!use_onednn(ctx, x.dtype())) {
    check_reference_layout(*this, ctx, x);
    return false;
  }
  if (!dnnl_) dnnl_ = std::make_unique<kernels::cpu::onednn::OnednnPool>(layer_str(*this));
  dnnl_->forward(plane_geometry(x.dim(0), C_, H_, W_, is_channels_last(ctx, x)), x.data<float>(), y.data<float>(),
                 ctx.step, nullptr);  // average: no workspace
  return true;
}

bool GlobalAvgPool::backward_onednn(const StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor& dx) {
  if (!use_onednn(ctx, x.dtype())) {
    check_reference_layout(*this, ctx, x);
    return false;
  }
  if (!dnnl_) dnnl_ = std::make_unique<kernels::cpu::onednn::OnednnPool>(layer_str(*this));
  dnnl_->backward(plane_geometry(x.dim(0), C_, H_, W_, is_channels_last(ctx, x)), x.data<float>(), dy.data<float>(),
                  dx.data<float>(), ctx.step, nullptr);
  return true;
}

}  // namespace dp::models
