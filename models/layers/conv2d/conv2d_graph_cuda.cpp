// Conv2d's CUDA path on cuDNN's graph API (train.cudnn_api = "graph"; runtime/cuda/cudnn_graph.h):
// plans chosen once per shape by timing (process-wide cache), the keys of
// models/layers/conv2d/conv_graph_keys.h.
//
// Forward: y = [relu](conv(x, w) [+ bias]) in one plan when cuDNN has an engine for that fused
// epilogue (the first tier of descriptions); else the convolution alone and the epilogue as own
// kernels (bias_add, relu) after it. Data gradient: dx = conv_dgrad(dy', w), overwritten.
// Filter gradient: the graph API writes its output (there is no beta = 1 as in the legacy
// cudnnConvolutionBackwardFilter, and describing the gradient as both input and output of an
// add node would make cuDNN read and write one buffer in one kernel, which it does not promise
// to do safely), so dw' = conv_wgrad(x, dy') goes into the layer's scratch and one kernel adds it
// into the bound gradient (add_inplace for a KCRS scratch, the transposing add for KRSC): the
// parameter gradients accumulate, as every layer's must. Bias gradient: kernels::cuda::bias_grad
// (cuDNN's legacy backward-bias refuses bf16). dy' is dy masked by a folded ReLU (y > 0).
//
// The filter is described KCRS and, channels last, also KRSC (conv_graph_keys.h): the KRSC copy
// of the weight is made in forward only while a chosen plan (or one not yet chosen) reads it.
//
// A layer with no graph plan for a pass (NoGraphPlan) says so once and runs the legacy API from
// then on (conv2d_cuda.cpp), its folded ReLU included.
#include <memory>

#include "kernels/cuda/elementwise.h"
#include "models/layers/common.h"
#include "models/layers/conv2d/conv2d.h"
#include "models/layers/conv2d/conv2d_cuda_util.h"
#include "models/layers/conv2d/conv_graph_keys.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/cudnn_graph.h"
#include "runtime/cuda/exec_context.h"
#include "runtime/log.h"

namespace dp::models {

struct Conv2d::GraphState {
  // What the plans below were chosen for (a change starts over); gpu null: nothing valid.
  const cuda::ExecContext* gpu = nullptr;
  ConvGraphShape shape;
  bool relu = false;
  std::shared_ptr<const cuda::GraphPlan> fwd, dgrad, wgrad;
  // Channels last with a 3x3-style filter: the weight copied KRSC (on gpu->compute()), made by
  // forward while some plan may read it; filled: it holds this step's weights.
  cuda::DeviceBuffer w_krsc;
  bool w_krsc_filled = false;
  cuda::DeviceBuffer dw_scratch;  // the filter gradient of one backward, before it is added
  cuda::DeviceBuffer dy_masked;   // a folded ReLU's masked output gradient
  bool no_dx = false;             // backward is asked for no input gradient: no data-gradient plan
  bool legacy = false;            // no graph plan for some pass: the legacy API from now on
};

namespace {

// Whether some pass's plan reads the KRSC copy (a pass not chosen yet might).
bool reads_krsc(const std::shared_ptr<const cuda::GraphPlan>& p, bool possible) {
  return possible && (!p || filter_layout_of(p->key()) == FilterLayout::Krsc);
}

// From now on the layer runs the legacy API; one warning says why.
void fall_back(bool& legacy, const std::string& who, const cuda::NoGraphPlan& e) {
  legacy = true;
  log::get("cudnn")->warn("{} falls back to cuDNN's legacy API: {}", who, e.what());
}

}  // namespace

bool Conv2d::uses_graph_api(const StepContext& ctx) const {
  return ctx.gpu->cudnn_api() == cuda::CudnnApi::Graph && !(graph_ && graph_->legacy);
}

Conv2d::GraphState& Conv2d::graph_state(const StepContext& ctx, int64_t batch) {
  if (!graph_) graph_.emplace();
  GraphState& st = *graph_;
  const ConvGraphShape shape{dims(batch), ctx.compute, ctx.channels_last, ctx.gpu->device(),
                             tf32_in_convolutions(ctx.gpu->tf32())};
  const bool relu = epilogue() == Epilogue::Relu;
  const bool same = st.gpu == ctx.gpu && st.relu == relu && st.shape.dtype == shape.dtype &&
                    st.shape.channels_last == shape.channels_last && st.shape.d.N == batch;
  if (same) return st;
  const bool legacy = st.legacy && st.gpu == ctx.gpu;
  st = GraphState();
  st.legacy = legacy;
  const size_t w_bytes = static_cast<size_t>(params_[0].numel()) * dtype_size(ctx.compute);
  st.dw_scratch = cuda::DeviceBuffer(w_bytes, ctx.gpu->compute());
  if (filter_layouts(shape.d, shape.channels_last).size() > 1) st.w_krsc = cuda::DeviceBuffer(w_bytes, ctx.gpu->compute());
  st.shape = shape;
  st.relu = relu;
  st.gpu = ctx.gpu;
  return st;
}

bool Conv2d::forward_graph(const StepContext& ctx, const Tensor& x, Tensor& y) {
  GraphState& st = graph_state(ctx, x.dim(0));
  cuda::ExecContext& gpu = *ctx.gpu;
  const DType dt = ctx.compute;
  const int64_t K = a_.out_channels, Cg = C_ / a_.groups, R = a_.kernel;
  void* w = params_[0].raw();
  void* b = a_.bias ? params_[1].raw() : nullptr;
  const bool krsc_possible = static_cast<bool>(st.w_krsc);
  if (reads_krsc(st.fwd, krsc_possible) || reads_krsc(st.dgrad, krsc_possible && !st.no_dx)) {
    conv_cuda::weight_to_krsc(dt, st.w_krsc.data(), w, K, Cg, R, R, gpu.compute());
    st.w_krsc_filled = true;
  } else {
    st.w_krsc_filled = false;
  }
  if (!st.fwd) {
    // Tiers: the fused epilogue, then (when there is one) the convolution alone.
    const uint8_t fusion = (a_.bias ? cuda::kFuseBias : 0) | (st.relu ? cuda::kFuseRelu : 0);
    std::vector<uint8_t> epilogues{fusion};
    if (fusion != cuda::kFuseNone) epilogues.push_back(cuda::kFuseNone);
    std::vector<std::vector<cuda::PlanRequest>> tiers;
    for (uint8_t f : epilogues) {
      auto& tier = tiers.emplace_back();
      for (FilterLayout l : filter_layouts(st.shape.d, st.shape.channels_last)) {
        void* wl = l == FilterLayout::Krsc ? st.w_krsc.data() : w;
        std::vector<void*> ptrs{x.raw(), wl};
        if (f & cuda::kFuseBias) ptrs.push_back(b);
        ptrs.push_back(y.raw());
        tier.push_back({conv_fprop_key(st.shape, l, f, x.raw(), wl, b, y.raw()), ptrs});
      }
    }
    try {
      st.fwd = cuda::choose_graph_plan(gpu, tiers, layer_str(*this));
    } catch (const cuda::NoGraphPlan& e) {
      fall_back(st.legacy, layer_str(*this), e);
      return false;
    }
  }
  const cuda::PlanKey& k = st.fwd->key();
  void* wl = filter_layout_of(k) == FilterLayout::Krsc ? st.w_krsc.data() : w;
  std::vector<void*> ptrs{x.raw(), wl};
  if (k.fusion & cuda::kFuseBias) ptrs.push_back(b);
  ptrs.push_back(y.raw());
  st.fwd->execute(gpu, ptrs);
  // The epilogue the plan did not fuse: y += bias (per channel), then the folded ReLU.
  if (a_.bias && !(k.fusion & cuda::kFuseBias)) {
    const int64_t N = x.dim(0), HW = OH_ * OW_;
    CHECK_CUDA(st.shape.channels_last ? kernels::cuda::bias_add(dt, y.raw(), b, N * HW, K, 1, gpu.compute())
                                      : kernels::cuda::bias_add(dt, y.raw(), b, N, K, HW, gpu.compute()));
  }
  if (st.relu && !(k.fusion & cuda::kFuseRelu)) conv_cuda::relu_in_place(y, gpu.compute());
  return true;
}

bool Conv2d::backward_graph(const StepContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx) {
  GraphState& st = graph_state(ctx, x.dim(0));
  cuda::ExecContext& gpu = *ctx.gpu;
  const DType dt = ctx.compute;
  const int64_t K = a_.out_channels, Cg = C_ / a_.groups, R = a_.kernel;
  void* w = params_[0].raw();
  void* g = st.relu ? const_cast<void*>(conv_cuda::relu_masked_grad(st.dy_masked, dy, y, gpu.compute())) : dy.raw();
  const std::vector<FilterLayout> layouts = filter_layouts(st.shape.d, st.shape.channels_last);
  st.no_dx = !dx.defined();
  try {
    if (dx.defined() && !st.dgrad) {
      std::vector<cuda::PlanRequest> tier;
      for (FilterLayout l : layouts) {
        void* wl = l == FilterLayout::Krsc ? st.w_krsc.data() : w;
        tier.push_back({conv_dgrad_key(st.shape, l, g, wl, dx.raw()), {g, wl, dx.raw()}});
      }
      st.dgrad = cuda::choose_graph_plan(gpu, {tier}, layer_str(*this));
    }
    if (!st.wgrad) {
      std::vector<cuda::PlanRequest> tier;
      for (FilterLayout l : layouts)
        tier.push_back({conv_wgrad_key(st.shape, l, x.raw(), g, st.dw_scratch.data()), {x.raw(), g, st.dw_scratch.data()}});
      st.wgrad = cuda::choose_graph_plan(gpu, {tier}, layer_str(*this));
    }
  } catch (const cuda::NoGraphPlan& e) {
    fall_back(st.legacy, layer_str(*this), e);
    return false;
  }

  // dx = conv_dgrad(dy', w), with the weight as its plan reads it.
  if (dx.defined()) {
    void* wl = w;
    if (filter_layout_of(st.dgrad->key()) == FilterLayout::Krsc) {
      if (!st.w_krsc_filled) conv_cuda::weight_to_krsc(dt, st.w_krsc.data(), w, K, Cg, R, R, gpu.compute());
      st.w_krsc_filled = true;
      wl = st.w_krsc.data();
    }
    void* ptrs[] = {g, wl, dx.raw()};
    st.dgrad->execute(gpu, ptrs);
  }

  // dW += conv_wgrad(x, dy'), through the scratch.
  void* wg_ptrs[] = {x.raw(), g, st.dw_scratch.data()};
  st.wgrad->execute(gpu, wg_ptrs);
  if (filter_layout_of(st.wgrad->key()) == FilterLayout::Krsc)
    conv_cuda::grad_add_from_krsc(dt, grads_[0].raw(), st.dw_scratch.data(), K, Cg, R, R, gpu.compute());
  else
    CHECK_CUDA(kernels::cuda::add_inplace(dt, grads_[0].raw(), st.dw_scratch.data(), grads_[0].numel(), gpu.compute()));

  // db += the sum of dy' over N, H, W.
  if (a_.bias) {
    const int64_t N = x.dim(0), HW = OH_ * OW_;
    CHECK_CUDA(st.shape.channels_last ? kernels::cuda::bias_grad(dt, grads_[1].raw(), g, N * HW, K, 1, gpu.compute())
                                      : kernels::cuda::bias_grad(dt, grads_[1].raw(), g, N, K, HW, gpu.compute()));
  }
  return true;
}

}  // namespace dp::models
