// Linear's oneDNN path: oneDNN's inner product forward (with a ReLU post-op when the graph
// folded a relu into this layer), backward data and backward weights; the weight in the
// primitive's preferred layout (a reorder from our (out, in) per call), the weight and bias
// gradients added (+=) into the gradient arena by an accumulating reorder and a loop. With a
// fused ReLU the backward first masks dy by the output (threshold_backward on the output).
// Primitives and their buffers are made once per batch size.
#include <map>
#include <utility>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/onednn.h"
#include "models/layers/common.h"
#include "models/layers/linear/linear.h"

namespace dp::models {

namespace dn = kernels::cpu::onednn;
using dnnl::memory;

struct Linear::OnednnState {
  struct Entry {
    dnnl::inner_product_forward fwd;
    dnnl::inner_product_backward_data bwd_d;
    dnnl::inner_product_backward_weights bwd_w;
    memory src, dst, bias, w_user, w_fwd, w_bwd, diff_src, diff_dst, diff_w, diff_w_user, diff_bias, masked_dy;
    memory scratch_f, scratch_d, scratch_w;
    dn::Reorder w_to_fwd, w_to_bwd, diff_w_accumulate;
  };
  std::map<std::pair<int64_t, bool>, Entry> entries;  // (batch, fused relu)
  Entry& entry(const Linear& l, int64_t batch);
};

namespace {
// The weight in the primitive's layout: a reorder target, or our buffer itself.
memory weight_memory(const dn::Reorder& r, const memory::desc& prim, const memory::desc& user) {
  return r ? dn::owned(prim) : dn::unbound(user);
}
}  // namespace

Linear::OnednnState::Entry& Linear::OnednnState::entry(const Linear& l, int64_t batch) {
  const auto key = std::make_pair(batch, l.fused_relu_);
  if (auto it = entries.find(key); it != entries.end()) return it->second;
  return dn::onednn_call(layer_str(l), [&]() -> Entry& {
    Entry e;
    const memory::desc src = dn::plain_md({batch, l.in_}, dn::Tag::nc), dst = dn::plain_md({batch, l.out_}, dn::Tag::nc);
    const memory::desc w_user = dn::plain_md({l.out_, l.in_}, dn::Tag::oi), w_any = dn::plain_md({l.out_, l.in_}, dn::Tag::any);
    const memory::desc bias = dn::plain_md({l.out_}, dn::Tag::x);
    const auto prop = dnnl::prop_kind::forward_training;
    auto fdesc = l.bias_ ? dnnl::inner_product_forward::desc(prop, src, w_any, bias, dst)
                         : dnnl::inner_product_forward::desc(prop, src, w_any, dst);
    dnnl::inner_product_forward::primitive_desc fpd(fdesc, dn::scratch_attr(l.fused_relu_), dn::engine());
    dnnl::inner_product_forward::primitive_desc hint(fdesc, dn::scratch_attr(false), dn::engine());
    dnnl::inner_product_backward_data::primitive_desc dpd(dnnl::inner_product_backward_data::desc(src, w_any, dst),
                                                          dn::scratch_attr(false), dn::engine(), hint);
    auto wdesc = l.bias_ ? dnnl::inner_product_backward_weights::desc(src, w_any, bias, dst)
                         : dnnl::inner_product_backward_weights::desc(src, w_any, dst);
    dnnl::inner_product_backward_weights::primitive_desc wpd(wdesc, dn::scratch_attr(false), dn::engine(), hint);
    e.fwd = dnnl::inner_product_forward(fpd);
    e.bwd_d = dnnl::inner_product_backward_data(dpd);
    e.bwd_w = dnnl::inner_product_backward_weights(wpd);
    e.src = dn::unbound(src), e.diff_src = dn::unbound(src), e.dst = dn::unbound(dst), e.diff_dst = dn::unbound(dst);
    e.bias = dn::unbound(bias), e.w_user = dn::unbound(w_user), e.diff_w_user = dn::unbound(w_user);
    e.w_to_fwd = dn::Reorder(w_user, fpd.weights_desc(), false);
    e.w_to_bwd = dn::Reorder(w_user, dpd.weights_desc(), false);
    e.w_fwd = weight_memory(e.w_to_fwd, fpd.weights_desc(), w_user);
    e.w_bwd = weight_memory(e.w_to_bwd, dpd.weights_desc(), w_user);
    e.diff_w = dn::owned(wpd.diff_weights_desc());
    e.diff_w_accumulate = dn::Reorder(wpd.diff_weights_desc(), w_user, true);
    if (l.bias_) e.diff_bias = dn::owned(bias);
    if (l.fused_relu_) e.masked_dy = dn::owned(dst);
    e.scratch_f = dn::unbound(fpd.scratchpad_desc());
    e.scratch_d = dn::unbound(dpd.scratchpad_desc());
    e.scratch_w = dn::unbound(wpd.scratchpad_desc());
    return entries.emplace(key, std::move(e)).first->second;
  });
}

void Linear::forward_onednn(const Tensor& x, Tensor& y) {
  OnednnState::Entry& e = onednn_state().entry(*this, x.dim(0));
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, dn::bind(e.src, x.raw())},
                                       {DNNL_ARG_WEIGHTS, dn::weights_for(e.w_to_fwd, e.w_user, e.w_fwd, params_[0].raw())},
                                       {DNNL_ARG_DST, dn::bind(e.dst, y.raw())},
                                       {DNNL_ARG_SCRATCHPAD, dn::scratch(e.scratch_f)}};
  if (bias_) args.emplace(DNNL_ARG_BIAS, dn::bind(e.bias, params_[1].raw()));
  dn::execute(e.fwd, args);
}

void Linear::backward_onednn(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx) {
  OnednnState::Entry& e = onednn_state().entry(*this, x.dim(0));
  const memory* diff_dst = &dn::bind(e.diff_dst, dy.raw());
  if (fused_relu_) {
    kernels::cpu::relu_backward<float>(static_cast<float*>(e.masked_dy.get_data_handle()), dy.data<float>(),
                                       y.data<float>(), dy.numel());
    diff_dst = &e.masked_dy;
  }
  std::unordered_map<int, memory> wargs{{DNNL_ARG_SRC, dn::bind(e.src, x.raw())},
                                        {DNNL_ARG_DIFF_DST, *diff_dst},
                                        {DNNL_ARG_DIFF_WEIGHTS, e.diff_w},
                                        {DNNL_ARG_SCRATCHPAD, dn::scratch(e.scratch_w)}};
  if (bias_) wargs.emplace(DNNL_ARG_DIFF_BIAS, e.diff_bias);
  dn::execute(e.bwd_w, wargs);
  e.diff_w_accumulate(e.diff_w, dn::bind(e.diff_w_user, grads_[0].raw()));
  if (bias_) dn::add_into(grads_[1].data<float>(), e.diff_bias, out_);
  if (!dx.defined()) return;
  dn::execute(e.bwd_d, {{DNNL_ARG_DIFF_DST, *diff_dst},
                        {DNNL_ARG_WEIGHTS, dn::weights_for(e.w_to_bwd, e.w_user, e.w_bwd, params_[0].raw())},
                        {DNNL_ARG_DIFF_SRC, dn::bind(e.diff_src, dx.raw())},
                        {DNNL_ARG_SCRATCHPAD, dn::scratch(e.scratch_d)}});
}

Linear::OnednnState& Linear::onednn_state() {
  if (!dnnl_) dnnl_.emplace();
  return *dnnl_;
}

}  // namespace dp::models
