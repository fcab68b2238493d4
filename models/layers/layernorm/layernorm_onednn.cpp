// LayerNorm's oneDNN path: oneDNN's layer normalization over the last dimension of a (rows, C)
// view, forward (training: it writes the rows' mean and variance, kept for the backward) and
// backward (data, scale and, with a bias, shift). The backward reuses the forward's statistics
// when it is for that forward's input (the same tensor in the same step), else it recomputes them
// with a forward into scratch. The statistics live in the step plan's kept bytes
// (StepContext::mem; backward_needs), or the layer's own when it runs alone. Primitives and their
// buffers are made once per row count.
#include <map>

#include "kernels/cpu/onednn.h"
#include "models/layers/common.h"
#include "models/layers/layernorm/layernorm.h"

namespace dp::models {

namespace dn = kernels::cpu::onednn;
using dnnl::memory;

struct LayerNorm::OnednnState {
  struct Entry {
    dnnl::layer_normalization_forward::primitive_desc fpd;
    dnnl::layer_normalization_forward fwd;
    dnnl::layer_normalization_backward bwd;
    memory src, dst, scale, shift, mean, var, scratch_f, scratch_b, diff_src, diff_dst, diff_scale, diff_shift;
    memory dst_scratch, dx_scratch;  // made on first need
    Tensor own_stats;                // mean and variance of a layer run alone (no step plan)
    const void* x = nullptr;         // whose statistics mean/var hold
    uint64_t step = 0;
  };
  std::map<int64_t, Entry> entries;  // by row count
  Entry& entry(const LayerNorm& l, int64_t rows);
  void run_forward(const LayerNorm& l, Entry& e, const Tensor& x, void* dst);
  // mean, then variance (rows f32 each): the step plan's kept bytes, or the entry's own.
  static void bind_stats(Entry& e, const LayerMemory& mem, int64_t rows) {
    const Shape shape{2 * rows};
    auto* p = static_cast<float*>(planned_or_own(mem.kept(shape, DType::F32), e.own_stats, shape).raw());
    dn::bind(e.mean, p), dn::bind(e.var, p + rows);
  }
};

namespace {
dnnl::normalization_flags ln_flags(bool bias) {
  return bias ? dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift
              : dnnl::normalization_flags::use_scale;
}
}  // namespace

LayerNorm::OnednnState::Entry& LayerNorm::OnednnState::entry(const LayerNorm& l, int64_t rows) {
  if (auto it = entries.find(rows); it != entries.end()) return it->second;
  return dn::onednn_call(layer_str(l), [&]() -> Entry& {
    Entry e;
    const memory::desc data = dn::plain_md({rows, l.C_}, dn::Tag::ab), vec = dn::plain_md({l.C_}, dn::Tag::x);
    const auto eps = static_cast<float>(l.eps_);
    e.fpd = dnnl::layer_normalization_forward::primitive_desc(
        dnnl::layer_normalization_forward::desc(dnnl::prop_kind::forward_training, data, eps, ln_flags(l.bias_)),
        dn::scratch_attr(), dn::engine());
    dnnl::layer_normalization_backward::primitive_desc bpd(
        dnnl::layer_normalization_backward::desc(dnnl::prop_kind::backward, data, data, eps, ln_flags(l.bias_)),
        dn::scratch_attr(), dn::engine(), e.fpd);
    e.fwd = dnnl::layer_normalization_forward(e.fpd);
    e.bwd = dnnl::layer_normalization_backward(bpd);
    e.src = dn::unbound(data), e.dst = dn::unbound(data), e.diff_src = dn::unbound(data), e.diff_dst = dn::unbound(data);
    e.scale = dn::unbound(vec), e.shift = dn::unbound(vec);
    e.mean = dn::unbound(e.fpd.mean_desc()), e.var = dn::unbound(e.fpd.variance_desc());  // bind_stats
    e.diff_scale = dn::owned(vec), e.diff_shift = dn::owned(vec);
    e.scratch_f = dn::unbound(e.fpd.scratchpad_desc());
    e.scratch_b = dn::unbound(bpd.scratchpad_desc());
    return entries.emplace(rows, std::move(e)).first->second;
  });
}

void LayerNorm::OnednnState::run_forward(const LayerNorm& l, Entry& e, const Tensor& x, void* dst) {
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, dn::bind(e.src, x.raw())},
                                       {DNNL_ARG_DST, dn::bind(e.dst, dst)},
                                       {DNNL_ARG_SCALE, dn::bind(e.scale, l.params_[0].raw())},
                                       {DNNL_ARG_MEAN, e.mean},
                                       {DNNL_ARG_VARIANCE, e.var},
                                       {DNNL_ARG_SCRATCHPAD, dn::scratch(e.scratch_f)}};
  if (l.bias_) args.emplace(DNNL_ARG_SHIFT, dn::bind(e.shift, l.params_[1].raw()));
  dn::execute(e.fwd, args);
}

void LayerNorm::forward_onednn(const StepContext& ctx, const Tensor& x, Tensor& y) {
  OnednnState::Entry& e = onednn_state().entry(*this, x.numel() / C_);
  OnednnState::bind_stats(e, ctx.mem, x.numel() / C_);
  onednn_state().run_forward(*this, e, x, y.raw());
  e.x = x.raw(), e.step = ctx.step;
}

void LayerNorm::backward_onednn(const StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor& dx) {
  OnednnState::Entry& e = onednn_state().entry(*this, x.numel() / C_);
  OnednnState::bind_stats(e, ctx.mem, x.numel() / C_);
  if (e.x != x.raw() || e.step != ctx.step) {  // the statistics are another input's
    if (!e.dst_scratch) e.dst_scratch = dn::owned(e.fpd.dst_desc());
    onednn_state().run_forward(*this, e, x, e.dst_scratch.get_data_handle());
    e.x = x.raw(), e.step = ctx.step;
  }
  if (!dx.defined() && !e.dx_scratch) e.dx_scratch = dn::owned(e.fpd.src_desc());
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, dn::bind(e.src, x.raw())},
                                       {DNNL_ARG_DIFF_DST, dn::bind(e.diff_dst, dy.raw())},
                                       {DNNL_ARG_SCALE, dn::bind(e.scale, params_[0].raw())},
                                       {DNNL_ARG_MEAN, e.mean},
                                       {DNNL_ARG_VARIANCE, e.var},
                                       {DNNL_ARG_DIFF_SCALE, e.diff_scale},
                                       {DNNL_ARG_SCRATCHPAD, dn::scratch(e.scratch_b)},
                                       {DNNL_ARG_DIFF_SRC, dx.defined() ? dn::bind(e.diff_src, dx.raw()) : e.dx_scratch}};
  if (bias_) {
    args.emplace(DNNL_ARG_SHIFT, dn::bind(e.shift, params_[1].raw()));
    args.emplace(DNNL_ARG_DIFF_SHIFT, e.diff_shift);
  }
  dn::execute(e.bwd, args);
  dn::add_into(grads_[0].data<float>(), e.diff_scale, C_);
  if (bias_) dn::add_into(grads_[1].data<float>(), e.diff_shift, C_);
}

LayerNorm::OnednnState& LayerNorm::onednn_state() {
  if (!dnnl_) dnnl_.emplace();
  return *dnnl_;
}

}  // namespace dp::models
