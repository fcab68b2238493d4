// Conv2d's oneDNN path: forward, backward data and backward weights on oneDNN's convolution
// primitives, NCHW or NHWC activations (ctx.channels_last), the weight in whatever layout the
// primitive prefers (blocked on AVX-512: a reorder from our OIHW per call, the weight changes every
// step), the weight and bias gradients computed by oneDNN and added (+=) into the gradient arena
// by an accumulating reorder. Primitives, their scratchpads and the blocked weight copies are
// made once per batch shape and kept. A fused ReLU is a post-op forward; backward masks dy by the
// output first (PyTorch's threshold_backward on the output, as the relu layer does).
// Determinism: oneDNN's direct convolution (algorithm::convolution_direct; no Winograd, whose
// results differ) with a fixed thread count gives the same bits on every run.
#include <map>
#include <tuple>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/onednn.h"
#include "models/layers/common.h"
#include "models/layers/conv2d/conv2d.h"

namespace dp::models {

namespace dn = kernels::cpu::onednn;
using dnnl::memory;

struct Conv2d::OnednnState {
  struct Fwd {
    dnnl::convolution_forward::primitive_desc pd;
    dnnl::convolution_forward prim;
    memory src, dst, bias, w_user, w, scratch;
    dn::Reorder w_reorder;  // OIHW -> the primitive's layout (empty when the same)
  };
  struct Bwd {
    dnnl::convolution_backward_data data;
    dnnl::convolution_backward_weights weights;
    memory src, diff_src, diff_dst, w_user, w, diff_w, diff_w_user, diff_bias, scratch_d, scratch_w, masked_dy;
    dn::Reorder w_reorder, diff_w_accumulate;
  };
  std::map<std::tuple<int64_t, bool, bool>, Fwd> fwd;  // (batch, nhwc, relu)
  std::map<std::tuple<int64_t, bool, bool>, Bwd> bwd;
  Bwd& backward_entry(const Conv2d& c, int64_t batch, bool nhwc);
};

namespace {

struct Geometry {
  memory::desc src, dst, w_user, w_any, bias;
  memory::dims strides, pad_l, pad_r;
};

// Our weight (OC, C/g, K, K) is oihw, or goihw (g, OC/g, C/g, K, K) with groups. pad_r makes
// oneDNN's output size floor((H + 2p - K) / s) + 1 like ours (it may be negative).
Geometry geometry(const kernels::cpu::Conv2dDims& d, bool nhwc) {
  Geometry g;
  g.src = dn::act_md(d.N, d.C, d.H, d.W, nhwc);
  g.dst = dn::act_md(d.N, d.OC, d.OH, d.OW, nhwc);
  memory::dims wdims = d.groups == 1 ? memory::dims{d.OC, d.C, d.K, d.K}
                                     : memory::dims{d.groups, d.OC / d.groups, d.C / d.groups, d.K, d.K};
  g.w_user = dn::plain_md(wdims, d.groups == 1 ? dn::Tag::oihw : dn::Tag::goihw);
  g.w_any = dn::plain_md(wdims, dn::Tag::any);
  g.bias = dn::plain_md({d.OC}, dn::Tag::x);
  g.strides = {d.stride, d.stride};
  g.pad_l = {d.pad, d.pad};
  g.pad_r = {(d.OH - 1) * d.stride + d.K - d.H - d.pad, (d.OW - 1) * d.stride + d.K - d.W - d.pad};
  return g;
}

dnnl::primitive_attr scratch_attr(bool relu) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (relu) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    attr.set_post_ops(ops);
  }
  return attr;
}

dnnl::convolution_forward::primitive_desc forward_pd(const Geometry& g, bool bias, bool relu) {
  const auto prop = dnnl::prop_kind::forward_training;
  const auto alg = dnnl::algorithm::convolution_direct;
  auto desc = bias ? dnnl::convolution_forward::desc(prop, alg, g.src, g.w_any, g.bias, g.dst, g.strides, g.pad_l,
                                                     g.pad_r)
                   : dnnl::convolution_forward::desc(prop, alg, g.src, g.w_any, g.dst, g.strides, g.pad_l, g.pad_r);
  return dnnl::convolution_forward::primitive_desc(desc, scratch_attr(relu), dn::engine());
}

}  // namespace

Conv2d::OnednnState& Conv2d::onednn_state() {
  if (!dnnl_) dnnl_.emplace();
  return *dnnl_;
}

void Conv2d::forward_onednn(const StepContext& ctx, const Tensor& x, Tensor& y) {
  const bool nhwc = is_channels_last(ctx, x);
  const auto key = std::make_tuple(x.dim(0), nhwc, fused_relu_);
  auto& map = onednn_state().fwd;
  auto it = map.find(key);
  if (it == map.end()) {
    it = dn::onednn_call(layer_str(*this) + " forward", [&] {
      OnednnState::Fwd f;
      const Geometry g = geometry(dims(x.dim(0)), nhwc);
      f.pd = forward_pd(g, a_.bias, fused_relu_);
      f.prim = dnnl::convolution_forward(f.pd);
      f.src = dn::unbound(g.src), f.dst = dn::unbound(g.dst), f.bias = dn::unbound(g.bias);
      f.w_user = dn::unbound(g.w_user);
      f.w_reorder = dn::Reorder(g.w_user, f.pd.weights_desc(), false);
      f.w = f.w_reorder ? dn::owned(f.pd.weights_desc()) : dn::unbound(g.w_user);
      f.scratch = dn::unbound(f.pd.scratchpad_desc());
      return map.emplace(key, std::move(f)).first;
    });
  }
  OnednnState::Fwd& f = it->second;
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, dn::bind(f.src, x.raw())},
                                       {DNNL_ARG_WEIGHTS, dn::weights_for(f.w_reorder, f.w_user, f.w, params_[0].raw())},
                                       {DNNL_ARG_DST, dn::bind(f.dst, y.raw())},
                                       {DNNL_ARG_SCRATCHPAD, dn::scratch(f.scratch)}};
  if (a_.bias) args.emplace(DNNL_ARG_BIAS, dn::bind(f.bias, params_[1].raw()));
  dn::execute(f.prim, args);
}

Conv2d::OnednnState::Bwd& Conv2d::OnednnState::backward_entry(const Conv2d& c, int64_t batch, bool nhwc) {
  const bool relu = c.fused_relu_, bias = c.a_.bias;
  const auto key = std::make_tuple(batch, nhwc, relu);
  auto& map = bwd;
  if (auto it = map.find(key); it != map.end()) return it->second;
  return dn::onednn_call(layer_str(c) + " backward", [&]() -> Bwd& {
    Bwd b;
    const Geometry g = geometry(c.dims(batch), nhwc);
    const auto fwd_pd = forward_pd(g, bias, false);  // the hint: same shapes and layouts
    const auto alg = dnnl::algorithm::convolution_direct;
    dnnl::convolution_backward_data::primitive_desc dpd(
        dnnl::convolution_backward_data::desc(alg, g.src, g.w_any, g.dst, g.strides, g.pad_l, g.pad_r),
        scratch_attr(false), dn::engine(), fwd_pd);
    auto wdesc = bias ? dnnl::convolution_backward_weights::desc(alg, g.src, g.w_any, g.bias, g.dst, g.strides,
                                                                    g.pad_l, g.pad_r)
                         : dnnl::convolution_backward_weights::desc(alg, g.src, g.w_any, g.dst, g.strides, g.pad_l,
                                                                    g.pad_r);
    dnnl::convolution_backward_weights::primitive_desc wpd(wdesc, scratch_attr(false), dn::engine(), fwd_pd);
    b.data = dnnl::convolution_backward_data(dpd);
    b.weights = dnnl::convolution_backward_weights(wpd);
    b.src = dn::unbound(g.src), b.diff_src = dn::unbound(g.src), b.diff_dst = dn::unbound(g.dst);
    b.w_user = dn::unbound(g.w_user), b.diff_w_user = dn::unbound(g.w_user);
    b.w_reorder = dn::Reorder(g.w_user, dpd.weights_desc(), false);
    b.w = b.w_reorder ? dn::owned(dpd.weights_desc()) : dn::unbound(g.w_user);
    b.diff_w = dn::owned(wpd.diff_weights_desc());
    b.diff_w_accumulate = dn::Reorder(wpd.diff_weights_desc(), g.w_user, true);
    if (bias) b.diff_bias = dn::owned(g.bias);
    b.scratch_d = dn::unbound(dpd.scratchpad_desc());
    b.scratch_w = dn::unbound(wpd.scratchpad_desc());
    if (relu) b.masked_dy = dn::owned(g.dst);
    return map.emplace(key, std::move(b)).first->second;
  });
}

void Conv2d::backward_onednn(const StepContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx) {
  OnednnState::Bwd& b = onednn_state().backward_entry(*this, x.dim(0), is_channels_last(ctx, x));
  const memory* diff_dst = &dn::bind(b.diff_dst, dy.raw());
  if (fused_relu_) {
    kernels::cpu::relu_backward<float>(static_cast<float*>(b.masked_dy.get_data_handle()), dy.data<float>(),
                                       y.data<float>(), dy.numel());
    diff_dst = &b.masked_dy;
  }
  std::unordered_map<int, memory> wargs{{DNNL_ARG_SRC, dn::bind(b.src, x.raw())},
                                        {DNNL_ARG_DIFF_DST, *diff_dst},
                                        {DNNL_ARG_DIFF_WEIGHTS, b.diff_w},
                                        {DNNL_ARG_SCRATCHPAD, dn::scratch(b.scratch_w)}};
  if (a_.bias) wargs.emplace(DNNL_ARG_DIFF_BIAS, b.diff_bias);
  dn::execute(b.weights, wargs);
  b.diff_w_accumulate(b.diff_w, dn::bind(b.diff_w_user, grads_[0].raw()));
  if (a_.bias) dn::add_into(grads_[1].data<float>(), b.diff_bias, a_.out_channels);
  if (!dx.defined()) return;
  dn::execute(b.data, {{DNNL_ARG_DIFF_DST, *diff_dst},
                       {DNNL_ARG_WEIGHTS, dn::weights_for(b.w_reorder, b.w_user, b.w, params_[0].raw())},
                       {DNNL_ARG_DIFF_SRC, dn::bind(b.diff_src, dx.raw())},
                       {DNNL_ARG_SCRATCHPAD, dn::scratch(b.scratch_d)}});
}

}  // namespace dp::models
