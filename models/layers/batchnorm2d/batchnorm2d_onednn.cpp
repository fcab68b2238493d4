// BatchNorm2d's oneDNN path (plain BN; SyncBN keeps the reference path, whose statistics are
// all-reduced): oneDNN's batch normalization forward (training: batch statistics; eval:
// use_global_stats with the running ones) and backward (data, scale and shift), NCHW or NHWC,
// with the ReLU fused (fuse_norm_relu: the forward applies it, the backward masks dy by the
// workspace it kept) when the graph folded a relu into this layer. The running statistics are
// updated here from oneDNN's batch mean and biased variance exactly as the reference does
// (momentum, unbiased variance). Unlike the reference, the backward reuses the forward's
// statistics and workspace when it is for that forward's input (the same tensor in the same
// step), else it recomputes them with a forward into scratch. The statistics and the workspace
// live in the step plan's kept bytes (StepContext::mem; backward_needs), or the layer's own when
// it runs alone.
// Determinism: oneDNN reduces the statistics per thread and then in a fixed order.
#include <map>
#include <tuple>

#include "kernels/cpu/onednn.h"
#include "models/layers/batchnorm2d/batchnorm2d.h"
#include "models/layers/common.h"

namespace dp::models {

namespace dn = kernels::cpu::onednn;
using dnnl::memory;

struct BatchNorm2d::OnednnState {
  struct Entry {
    dnnl::batch_normalization_forward::primitive_desc fpd;
    dnnl::batch_normalization_forward fwd;
    dnnl::batch_normalization_backward bwd;
    bool have_bwd = false;
    memory src, dst, scale, shift, mean, var, ws, scratch, scratch_bwd;
    memory diff_src, diff_dst, diff_scale, diff_shift;
    memory dst_scratch, dx_scratch;  // made on first need: a backward of another input, no dx wanted
    Tensor own_kept;  // the statistics and the workspace of a layer run alone (no step plan)
    // Which input the statistics and workspace in this entry belong to.
    const void* x = nullptr;
    uint64_t step = 0;
  };
  std::map<std::tuple<int64_t, bool, bool, bool>, Entry> entries;  // (batch, nhwc, training, relu)
  Entry& entry(const BatchNorm2d& bn, int64_t batch, bool nhwc, bool training);
  void bind_kept(const BatchNorm2d& bn, Entry& e, const LayerMemory& mem, bool training);
  void make_backward(const BatchNorm2d& bn, Entry& e, bool training);
  void run_forward(const BatchNorm2d& bn, Entry& e, const Tensor& x, void* dst, bool training);
};

namespace {
dnnl::normalization_flags bn_flags(bool training, bool relu) {
  auto f = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  if (!training) f = f | dnnl::normalization_flags::use_global_stats;
  if (relu) f = f | dnnl::normalization_flags::fuse_norm_relu;
  return f;
}
}  // namespace

size_t BatchNorm2d::onednn_relu_workspace_bytes(int64_t N, bool nhwc) const {
  return dn::onednn_call(layer_str(*this) + " workspace", [&] {
    const dnnl::batch_normalization_forward::desc d(dnnl::prop_kind::forward_training, dn::act_md(N, C_, H_, W_, nhwc),
                                                    static_cast<float>(eps_), bn_flags(true, true));
    return dnnl::batch_normalization_forward::primitive_desc(d, dn::scratch_attr(), dn::engine()).workspace_desc().get_size();
  });
}

BatchNorm2d::OnednnState::Entry& BatchNorm2d::OnednnState::entry(const BatchNorm2d& bn, int64_t batch, bool nhwc,
                                                                 bool training) {
  const bool relu = bn.epilogue() == Epilogue::Relu;
  const auto key = std::make_tuple(batch, nhwc, training, relu);
  if (auto it = entries.find(key); it != entries.end()) return it->second;
  return dn::onednn_call(layer_str(bn) + " forward", [&]() -> Entry& {
    Entry e;
    const memory::desc data = dn::act_md(batch, bn.C_, bn.H_, bn.W_, nhwc);
    const memory::desc vec = dn::plain_md({bn.C_}, dn::Tag::x);
    // forward_training also with the running statistics (eval): it keeps the ReLU's workspace.
    e.fpd = dnnl::batch_normalization_forward::primitive_desc(
        dnnl::batch_normalization_forward::desc(dnnl::prop_kind::forward_training, data, static_cast<float>(bn.eps_),
                                                bn_flags(training, relu)),
        dn::scratch_attr(), dn::engine());
    e.fwd = dnnl::batch_normalization_forward(e.fpd);
    e.src = dn::unbound(data), e.dst = dn::unbound(data), e.diff_src = dn::unbound(data), e.diff_dst = dn::unbound(data);
    e.scale = dn::unbound(vec), e.shift = dn::unbound(vec);
    e.mean = dn::unbound(vec), e.var = dn::unbound(vec);  // bound per call: bind_kept
    if (relu) e.ws = dn::unbound(e.fpd.workspace_desc());
    e.scratch = dn::unbound(e.fpd.scratchpad_desc());
    return entries.emplace(key, std::move(e)).first->second;
  });
}

// The kept bytes (backward_needs: the batch mean and variance, then the ReLU's workspace): the
// step plan's, or the entry's own; in eval the statistics are the running ones.
void BatchNorm2d::OnednnState::bind_kept(const BatchNorm2d& bn, Entry& e, const LayerMemory& mem, bool training) {
  const size_t stats = 2 * static_cast<size_t>(bn.C_) * sizeof(float);
  const size_t bytes = stats + (e.ws ? e.ws.get_desc().get_size() : 0);
  const Shape shape{static_cast<int64_t>(bytes)};
  auto* base = static_cast<unsigned char*>(planned_or_own(mem.kept(shape, DType::U8), e.own_kept, shape, DType::U8).raw());
  if (training) dn::bind(e.mean, base), dn::bind(e.var, base + stats / 2);
  else dn::bind(e.mean, bn.buffers_[0].raw()), dn::bind(e.var, bn.buffers_[1].raw());
  if (e.ws) dn::bind(e.ws, base + stats);
}

void BatchNorm2d::OnednnState::make_backward(const BatchNorm2d& bn, Entry& e, bool training) {
  dn::onednn_call(layer_str(bn) + " backward", [&] {
    const memory::desc data = e.fpd.src_desc();
    dnnl::batch_normalization_backward::primitive_desc bpd(
        dnnl::batch_normalization_backward::desc(dnnl::prop_kind::backward, data, data, static_cast<float>(bn.eps_),
                                                 bn_flags(training, bn.epilogue() == Epilogue::Relu)),
        dn::scratch_attr(), dn::engine(), e.fpd);
    e.bwd = dnnl::batch_normalization_backward(bpd);
    const memory::desc vec = dn::plain_md({bn.C_}, dn::Tag::x);
    e.diff_scale = dn::owned(vec), e.diff_shift = dn::owned(vec);
    e.scratch_bwd = dn::unbound(bpd.scratchpad_desc());
    e.have_bwd = true;
  });
}

// Runs the forward of entry e on x into dst; the statistics land in e.mean / e.var (training)
// or come from the running buffers (eval).
void BatchNorm2d::OnednnState::run_forward(const BatchNorm2d& bn, Entry& e, const Tensor& x, void* dst,
                                           bool training) {
  const auto& params_ = bn.params_;
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, dn::bind(e.src, x.raw())},
                                       {DNNL_ARG_DST, dn::bind(e.dst, dst)},
                                       {DNNL_ARG_SCALE, dn::bind(e.scale, params_[0].raw())},
                                       {DNNL_ARG_SHIFT, dn::bind(e.shift, params_[1].raw())},
                                       {DNNL_ARG_MEAN, e.mean},
                                       {DNNL_ARG_VARIANCE, e.var},
                                       {DNNL_ARG_SCRATCHPAD, dn::scratch(e.scratch)}};
  if (bn.epilogue() == Epilogue::Relu) args.emplace(DNNL_ARG_WORKSPACE, e.ws);
  dn::execute(e.fwd, args);
}

void BatchNorm2d::forward_onednn(const StepContext& ctx, const Tensor& x, Tensor& y) {
  const int64_t N = x.dim(0);
  DP_CHECK(buffers_[0].dtype() == DType::F32 && buffers_[1].dtype() == DType::F32,
           "{}: the oneDNN path needs f32 running statistics, got {}", layer_str(*this), buffers_[0].describe());
  if (ctx.training && N * H_ * W_ <= 1)
    DP_THROW_USER("{}: training needs more than 1 value per channel, got a batch of {} with {}x{} pixels",
                  layer_str(*this), N, H_, W_);
  OnednnState::Entry& e = onednn_state().entry(*this, N, is_channels_last(ctx, x), ctx.training);
  onednn_state().bind_kept(*this, e, ctx.mem, ctx.training);
  onednn_state().run_forward(*this, e, x, y.raw(), ctx.training);
  e.x = x.raw(), e.step = ctx.step;
  if (!ctx.training) return;
  // torch: running = (1 - momentum) running + momentum batch, with the unbiased variance.
  const double M = static_cast<double>(N * H_ * W_), unbias = M / (M - 1);
  const float* mean = static_cast<const float*>(e.mean.get_data_handle());
  const float* var = static_cast<const float*>(e.var.get_data_handle());
  float* rm = buffers_[0].data<float>();
  float* rv = buffers_[1].data<float>();
  for (int64_t c = 0; c < C_; ++c) {
    rm[c] = static_cast<float>((1 - momentum_) * rm[c] + momentum_ * static_cast<double>(mean[c]));
    rv[c] = static_cast<float>((1 - momentum_) * rv[c] + momentum_ * static_cast<double>(var[c]) * unbias);
  }
  buffers_[2].data<int64_t>()[0] += 1;
}

void BatchNorm2d::backward_onednn(const StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor& dx) {
  OnednnState::Entry& e = onednn_state().entry(*this, x.dim(0), is_channels_last(ctx, x), ctx.training);
  if (!e.have_bwd) onednn_state().make_backward(*this, e, ctx.training);
  onednn_state().bind_kept(*this, e, ctx.mem, ctx.training);
  // The statistics (training) and the ReLU's workspace must be this input's.
  if ((ctx.training || epilogue() == Epilogue::Relu) && (e.x != x.raw() || e.step != ctx.step)) {
    if (!e.dst_scratch) e.dst_scratch = dn::owned(e.fpd.dst_desc());  // made only when needed
    onednn_state().run_forward(*this, e, x, e.dst_scratch.get_data_handle(), ctx.training);
    e.x = x.raw(), e.step = ctx.step;
  }
  if (!dx.defined() && !e.dx_scratch) e.dx_scratch = dn::owned(e.fpd.src_desc());
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, dn::bind(e.src, x.raw())},       {DNNL_ARG_DIFF_DST, dn::bind(e.diff_dst, dy.raw())},
      {DNNL_ARG_SCALE, dn::bind(e.scale, params_[0].raw())}, {DNNL_ARG_MEAN, e.mean},
      {DNNL_ARG_SHIFT, dn::bind(e.shift, params_[1].raw())},  // unused, yet oneDNN 2.6 wants it
      {DNNL_ARG_VARIANCE, e.var},                     {DNNL_ARG_DIFF_SCALE, e.diff_scale},
      {DNNL_ARG_DIFF_SHIFT, e.diff_shift},            {DNNL_ARG_SCRATCHPAD, dn::scratch(e.scratch_bwd)},
      {DNNL_ARG_DIFF_SRC, dx.defined() ? dn::bind(e.diff_src, dx.raw()) : e.dx_scratch}};
  if (epilogue() == Epilogue::Relu) args.emplace(DNNL_ARG_WORKSPACE, e.ws);
  dn::execute(e.bwd, args);
  dn::add_into(grads_[0].data<float>(), e.diff_scale, C_);
  dn::add_into(grads_[1].data<float>(), e.diff_shift, C_);
}

BatchNorm2d::OnednnState& BatchNorm2d::onednn_state() {
  if (!dnnl_) dnnl_.emplace();
  return *dnnl_;
}

}  // namespace dp::models
