// Conv2d's oneDNN path: forward, backward data and backward weights on oneDNN's convolution
// primitives, NCHW or NHWC activations (ctx.channels_last), the weight in whatever layout the
// primitive prefers (blocked on AVX-512: a reorder from our OIHW per call, the weight changes every
// step), the weight and bias gradients computed by oneDNN and added (+=) into the gradient arena
// by an accumulating reorder. Primitives, their scratchpads and the blocked weight copies are
// made once per batch shape and kept. A fused ReLU is a post-op forward; backward masks dy by the
// output first (PyTorch's threshold_backward on the output, as the relu layer does).
// Algorithms: Winograd where onednn_winograd_fits says so (train.cpu_conv_algorithm = "auto"),
// else direct. Winograd's kernels take activations only in oneDNN's blocked layout (nChw16c): x,
// y, dy and dx are reordered into and out of it around each call, through this thread's scratch
// slots (temporaries of one call; nothing activation-sized is kept per layer). Should oneDNN
// decline Winograd for a shape, the direct algorithm is used.
// Determinism: both algorithms split work by the shape and the thread count only and reduce in a
// fixed order, so a fixed thread count gives the same bits on every run (tests/models/
// test_onednn_layers.cpp); Winograd's results differ from the direct ones in the last bits.
#include <map>
#include <tuple>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/onednn.h"
#include "models/layers/common.h"
#include "models/layers/conv2d/conv2d.h"
#include "models/layers/conv2d/onednn_conv_choice.h"

namespace dp::models {

namespace dn = kernels::cpu::onednn;
using dnnl::memory;

struct Conv2d::OnednnState {
  // Key: (batch, nhwc, fused relu, Winograd wanted).
  using Key = std::tuple<int64_t, bool, bool, bool>;
  struct Fwd {
    dnnl::convolution_forward::primitive_desc pd;
    dnnl::convolution_forward prim;
    memory src, dst, bias, w_user, w, scratch;
    dn::Reorder w_reorder;  // OIHW -> the primitive's layout (empty when the same)
    bool blocked = false;   // Winograd: x and y pass through src_blk, dst_blk (scratch slots A, B)
    memory src_blk, dst_blk;
    dn::Reorder src_in, dst_out;
  };
  struct Bwd {
    dnnl::convolution_backward_data data;
    dnnl::convolution_backward_weights weights;
    memory src, diff_src, diff_dst, w_user, w, diff_w, diff_w_user, diff_bias, scratch_d, scratch_w, masked_dy;
    Tensor own_masked_dy;  // a fused ReLU's masked dy when the step plans no scratch (a layer run alone)
    dn::Reorder w_reorder, diff_w_accumulate;
    bool blocked = false;  // Winograd: dy, x and dx pass through blocked copies (scratch slots A, B, C)
    memory diff_dst_blk, src_blk, diff_src_blk;
    dn::Reorder diff_dst_in, src_in, diff_src_out;
  };
  std::map<Key, Fwd> fwd;
  std::map<Key, Bwd> bwd;
  Fwd& forward_entry(const Conv2d& c, const Key& key);
  Bwd& backward_entry(const Conv2d& c, const Key& key);
};

namespace {

struct Geometry {
  memory::desc src, dst, src_blk, dst_blk, w_user, w_any, bias;
  memory::dims strides, pad_l, pad_r;
  dnnl::algorithm alg = dnnl::algorithm::convolution_direct;
};

// Our weight (OC, C/g, K, K) is oihw, or goihw (g, OC/g, C/g, K, K) with groups. pad_r makes
// oneDNN's output size floor((H + 2p - K) / s) + 1 like ours (it may be negative).
Geometry geometry(const kernels::cpu::Conv2dDims& d, bool nhwc) {
  Geometry g;
  g.src = dn::act_md(d.N, d.C, d.H, d.W, nhwc);
  g.dst = dn::act_md(d.N, d.OC, d.OH, d.OW, nhwc);
  g.src_blk = dn::plain_md({d.N, d.C, d.H, d.W}, dn::Tag::nChw16c);
  g.dst_blk = dn::plain_md({d.N, d.OC, d.OH, d.OW}, dn::Tag::nChw16c);
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

// The descriptors a primitive of `g` computes on: the activations' own, or the blocked ones.
struct Acts {
  const memory::desc& src;
  const memory::desc& dst;
};
Acts acts_of(const Geometry& g, bool blocked) { return blocked ? Acts{g.src_blk, g.dst_blk} : Acts{g.src, g.dst}; }

dnnl::convolution_forward::primitive_desc forward_pd(const Geometry& g, bool bias, bool relu) {
  const auto prop = dnnl::prop_kind::forward_training;
  const Acts a = acts_of(g, g.alg == dnnl::algorithm::convolution_winograd);
  auto desc = bias ? dnnl::convolution_forward::desc(prop, g.alg, a.src, g.w_any, g.bias, a.dst, g.strides, g.pad_l,
                                                     g.pad_r)
                   : dnnl::convolution_forward::desc(prop, g.alg, a.src, g.w_any, a.dst, g.strides, g.pad_l, g.pad_r);
  return dnnl::convolution_forward::primitive_desc(desc, dn::scratch_attr(relu), dn::engine());
}

// The geometry for a call, with Winograd chosen when wanted and the forward primitive of it
// exists (oneDNN declines shapes its kernels do not cover: then direct).
Geometry chosen_geometry(const kernels::cpu::Conv2dDims& d, bool nhwc, bool winograd, bool bias, bool relu) {
  Geometry g = geometry(d, nhwc);
  if (!winograd) return g;
  g.alg = dnnl::algorithm::convolution_winograd;
  try {
    forward_pd(g, bias, relu);
  } catch (const dnnl::error&) {
    g.alg = dnnl::algorithm::convolution_direct;
  }
  return g;
}

}  // namespace

Conv2d::OnednnState& Conv2d::onednn_state() {
  if (!dnnl_) dnnl_.emplace();
  return *dnnl_;
}

Conv2d::OnednnState::Fwd& Conv2d::OnednnState::forward_entry(const Conv2d& c, const Key& key) {
  if (auto it = fwd.find(key); it != fwd.end()) return it->second;
  return dn::onednn_call(layer_str(c) + " forward", [&]() -> Fwd& {
    const auto [batch, nhwc, relu, winograd] = key;
    const Geometry g = chosen_geometry(c.dims(batch), nhwc, winograd, c.a_.bias, relu);
    Fwd f;
    f.pd = forward_pd(g, c.a_.bias, relu);
    f.prim = dnnl::convolution_forward(f.pd);
    f.src = dn::unbound(g.src), f.dst = dn::unbound(g.dst), f.bias = dn::unbound(g.bias);
    f.w_user = dn::unbound(g.w_user);
    f.w_reorder = dn::Reorder(g.w_user, f.pd.weights_desc(), false);
    f.w = f.w_reorder ? dn::owned(f.pd.weights_desc()) : dn::unbound(g.w_user);
    f.scratch = dn::unbound(f.pd.scratchpad_desc());
    f.blocked = g.alg == dnnl::algorithm::convolution_winograd;
    if (f.blocked) {
      f.src_blk = dn::unbound(g.src_blk), f.dst_blk = dn::unbound(g.dst_blk);
      f.src_in = dn::Reorder(g.src, g.src_blk, false);
      f.dst_out = dn::Reorder(g.dst_blk, g.dst, false);
    }
    return fwd.emplace(key, std::move(f)).first->second;
  });
}

void Conv2d::forward_onednn(const StepContext& ctx, const Tensor& x, Tensor& y) {
  const bool winograd = onednn_winograd_fits(dims(x.dim(0)), ctx.cpu_conv_algorithm, kernels::cpu::onednn_has_avx512_core());
  const bool relu = epilogue() == Epilogue::Relu;
  OnednnState::Fwd& f = onednn_state().forward_entry(*this, {x.dim(0), is_channels_last(ctx, x), relu, winograd});
  const memory* src = &dn::bind(f.src, x.raw());
  const memory* dst = &dn::bind(f.dst, y.raw());
  if (f.blocked) {
    f.src_in(*src, dn::scratch(f.src_blk, dn::Slot::A));
    src = &f.src_blk;
    dst = &dn::scratch(f.dst_blk, dn::Slot::B);
  }
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, *src},
                                       {DNNL_ARG_WEIGHTS, dn::weights_for(f.w_reorder, f.w_user, f.w, params_[0].raw())},
                                       {DNNL_ARG_DST, *dst},
                                       {DNNL_ARG_SCRATCHPAD, dn::scratch(f.scratch)}};
  if (a_.bias) args.emplace(DNNL_ARG_BIAS, dn::bind(f.bias, params_[1].raw()));
  dn::execute(f.prim, args);
  if (f.blocked) f.dst_out(f.dst_blk, f.dst);
}

Conv2d::OnednnState::Bwd& Conv2d::OnednnState::backward_entry(const Conv2d& c, const Key& key) {
  if (auto it = bwd.find(key); it != bwd.end()) return it->second;
  return dn::onednn_call(layer_str(c) + " backward", [&]() -> Bwd& {
    const auto [batch, nhwc, relu, winograd] = key;
    const bool bias = c.a_.bias;
    const Geometry g = chosen_geometry(c.dims(batch), nhwc, winograd, bias, false);
    const auto fwd_pd = forward_pd(g, bias, false);  // the hint: same shapes and layouts
    const Acts a = acts_of(g, g.alg == dnnl::algorithm::convolution_winograd);
    dnnl::convolution_backward_data::primitive_desc dpd(
        dnnl::convolution_backward_data::desc(g.alg, a.src, g.w_any, a.dst, g.strides, g.pad_l, g.pad_r),
        dn::scratch_attr(false), dn::engine(), fwd_pd);
    auto wdesc = bias ? dnnl::convolution_backward_weights::desc(g.alg, a.src, g.w_any, g.bias, a.dst, g.strides,
                                                                    g.pad_l, g.pad_r)
                         : dnnl::convolution_backward_weights::desc(g.alg, a.src, g.w_any, a.dst, g.strides, g.pad_l,
                                                                    g.pad_r);
    dnnl::convolution_backward_weights::primitive_desc wpd(wdesc, dn::scratch_attr(false), dn::engine(), fwd_pd);
    Bwd b;
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
    if (relu) b.masked_dy = dn::unbound(g.dst);  // the step plan's scratch, or own_masked_dy
    b.blocked = g.alg == dnnl::algorithm::convolution_winograd;
    if (b.blocked) {
      b.diff_dst_blk = dn::unbound(g.dst_blk), b.src_blk = dn::unbound(g.src_blk), b.diff_src_blk = dn::unbound(g.src_blk);
      b.diff_dst_in = dn::Reorder(g.dst, g.dst_blk, false);
      b.src_in = dn::Reorder(g.src, g.src_blk, false);
      b.diff_src_out = dn::Reorder(g.src_blk, g.src, false);
    }
    return bwd.emplace(key, std::move(b)).first->second;
  });
}

void Conv2d::backward_onednn(const StepContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx) {
  const bool winograd = onednn_winograd_fits(dims(x.dim(0)), ctx.cpu_conv_algorithm, kernels::cpu::onednn_has_avx512_core());
  const bool relu = epilogue() == Epilogue::Relu;
  OnednnState::Bwd& b = onednn_state().backward_entry(*this, {x.dim(0), is_channels_last(ctx, x), relu, winograd});
  const memory* diff_dst = &dn::bind(b.diff_dst, dy.raw());
  if (relu) {
    const Tensor m = planned_or_own(ctx.mem.scratch(dy.shape(), DType::F32), b.own_masked_dy, dy.shape());
    kernels::cpu::relu_backward<float>(m.data<float>(), dy.data<float>(), y.data<float>(), dy.numel());
    diff_dst = &dn::bind(b.masked_dy, m.raw());
  }
  const memory* src = &dn::bind(b.src, x.raw());
  if (b.blocked) {
    b.diff_dst_in(*diff_dst, dn::scratch(b.diff_dst_blk, dn::Slot::A));
    diff_dst = &b.diff_dst_blk;
    b.src_in(*src, dn::scratch(b.src_blk, dn::Slot::B));
    src = &b.src_blk;
  }
  std::unordered_map<int, memory> wargs{{DNNL_ARG_SRC, *src},
                                        {DNNL_ARG_DIFF_DST, *diff_dst},
                                        {DNNL_ARG_DIFF_WEIGHTS, b.diff_w},
                                        {DNNL_ARG_SCRATCHPAD, dn::scratch(b.scratch_w)}};
  if (a_.bias) wargs.emplace(DNNL_ARG_DIFF_BIAS, b.diff_bias);
  dn::execute(b.weights, wargs);
  b.diff_w_accumulate(b.diff_w, dn::bind(b.diff_w_user, grads_[0].raw()));
  if (a_.bias) dn::add_into(grads_[1].data<float>(), b.diff_bias, a_.out_channels);
  if (!dx.defined()) return;
  const memory& diff_src = b.blocked ? dn::scratch(b.diff_src_blk, dn::Slot::C) : dn::bind(b.diff_src, dx.raw());
  dn::execute(b.data, {{DNNL_ARG_DIFF_DST, *diff_dst},
                       {DNNL_ARG_WEIGHTS, dn::weights_for(b.w_reorder, b.w_user, b.w, params_[0].raw())},
                       {DNNL_ARG_DIFF_SRC, diff_src},
                       {DNNL_ARG_SCRATCHPAD, dn::scratch(b.scratch_d)}});
  if (b.blocked) b.diff_src_out(b.diff_src_blk, dn::bind(b.diff_src, dx.raw()));
}

}  // namespace dp::models
