// Gelu's oneDNN path for the erf form: oneDNN's eltwise gelu_erf forward and backward (from the
// source x) over the tensor as one flat vector. Primitives are made once per element count. (The
// tanh form runs gelu_tanh_f32.h: oneDNN 2.6's AVX2 gelu_tanh was 3.6x slower than its AVX-512 one.)
#include <map>

#include "kernels/cpu/onednn.h"
#include "models/layers/common.h"
#include "models/layers/gelu/gelu.h"

namespace dp::models {

namespace dn = kernels::cpu::onednn;
using dnnl::memory;

struct Gelu::OnednnState {
  struct Entry {
    dnnl::eltwise_forward fwd;
    dnnl::eltwise_backward bwd;
    memory src, dst, diff_src, diff_dst, scratch_f, scratch_b;
  };
  std::map<int64_t, Entry> entries;  // by element count
  Entry& entry(const Gelu& l, int64_t n);
};

Gelu::OnednnState::Entry& Gelu::OnednnState::entry(const Gelu& l, int64_t n) {
  if (auto it = entries.find(n); it != entries.end()) return it->second;
  return dn::onednn_call(layer_str(l), [&]() -> Entry& {
    Entry e;
    const memory::desc data = dn::plain_md({n}, dn::Tag::a);
    const auto algo = dnnl::algorithm::eltwise_gelu_erf;
    dnnl::eltwise_forward::primitive_desc fpd(
        dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training, algo, data, 0.f, 0.f), dn::scratch_attr(),
        dn::engine());
    dnnl::eltwise_backward::primitive_desc bpd(dnnl::eltwise_backward::desc(algo, data, data, 0.f, 0.f),
                                               dn::scratch_attr(), dn::engine(), fpd);
    e.fwd = dnnl::eltwise_forward(fpd);
    e.bwd = dnnl::eltwise_backward(bpd);
    e.src = dn::unbound(data), e.dst = dn::unbound(data), e.diff_src = dn::unbound(data), e.diff_dst = dn::unbound(data);
    e.scratch_f = dn::unbound(fpd.scratchpad_desc());
    e.scratch_b = dn::unbound(bpd.scratchpad_desc());
    return entries.emplace(n, std::move(e)).first->second;
  });
}

void Gelu::forward_onednn(const Tensor& x, Tensor& y) {
  OnednnState::Entry& e = onednn_state().entry(*this, x.numel());
  dn::execute(e.fwd, {{DNNL_ARG_SRC, dn::bind(e.src, x.raw())},
                      {DNNL_ARG_DST, dn::bind(e.dst, y.raw())},
                      {DNNL_ARG_SCRATCHPAD, dn::scratch(e.scratch_f)}});
}

void Gelu::backward_onednn(const Tensor& x, const Tensor& dy, Tensor& dx) {
  OnednnState::Entry& e = onednn_state().entry(*this, x.numel());
  dn::execute(e.bwd, {{DNNL_ARG_SRC, dn::bind(e.src, x.raw())},
                      {DNNL_ARG_DIFF_DST, dn::bind(e.diff_dst, dy.raw())},
                      {DNNL_ARG_DIFF_SRC, dn::bind(e.diff_src, dx.raw())},
                      {DNNL_ARG_SCRATCHPAD, dn::scratch(e.scratch_b)}});
}

Gelu::OnednnState& Gelu::onednn_state() {
  if (!dnnl_) dnnl_.emplace();
  return *dnnl_;
}

}  // namespace dp::models
