#include "kernels/cpu/onednn_pool.h"

#include "kernels/cpu/onednn.h"

namespace dp::kernels::cpu::onednn {

struct OnednnPool::Entry {
  dnnl::pooling_forward::primitive_desc fpd;
  dnnl::pooling_forward fwd;
  dnnl::pooling_backward bwd;
  memory src, dst, diff_src, diff_dst, ws, scratch, scratch_bwd, dst_scratch;
  memory own_ws;  // the workspace when the caller gives none (made on first need)
  const void* ws_x = nullptr;  // which input (and step) the workspace belongs to
  uint64_t ws_step = 0;
};

OnednnPool::OnednnPool(std::string where) : where_(std::move(where)) {}
OnednnPool::~OnednnPool() = default;
OnednnPool::OnednnPool(OnednnPool&&) noexcept = default;
OnednnPool& OnednnPool::operator=(OnednnPool&&) noexcept = default;

namespace {
dnnl::algorithm pool_algorithm(const PoolGeometry& g) {
  return g.max ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_include_padding;
}

// The forward and backward op descriptors of g (floor mode: the right padding that makes oneDNN's
// output size ours).
struct PoolDescs {
  dnnl::pooling_forward::desc fwd;
  dnnl::pooling_backward::desc bwd;
};
PoolDescs pool_descs(const PoolGeometry& g) {
  const memory::desc src = act_md(g.N, g.C, g.H, g.W, g.nhwc), dst = act_md(g.N, g.C, g.OH, g.OW, g.nhwc);
  const memory::dims strides{g.stride, g.stride}, kernel{g.KH, g.KW}, pad_l{g.pad, g.pad};
  const memory::dims pad_r{(g.OH - 1) * g.stride + g.KH - g.H - g.pad, (g.OW - 1) * g.stride + g.KW - g.W - g.pad};
  return {dnnl::pooling_forward::desc(dnnl::prop_kind::forward_training, pool_algorithm(g), src, dst, strides, kernel,
                                      pad_l, pad_r),
          dnnl::pooling_backward::desc(pool_algorithm(g), src, dst, strides, kernel, pad_l, pad_r)};
}
}  // namespace

size_t pool_workspace_bytes(const PoolGeometry& g) {
  if (!g.max) return 0;
  return onednn_call("pooling workspace", [&] {
    return dnnl::pooling_forward::primitive_desc(pool_descs(g).fwd, scratch_attr(), engine()).workspace_desc().get_size();
  });
}

OnednnPool::Entry& OnednnPool::entry(const PoolGeometry& g) {
  if (auto it = entries_.find(g); it != entries_.end()) return *it->second;
  return onednn_call(where_, [&]() -> Entry& {
    auto e = std::make_unique<Entry>();
    const PoolDescs d = pool_descs(g);
    const dnnl::primitive_attr attr = scratch_attr();
    e->fpd = dnnl::pooling_forward::primitive_desc(d.fwd, attr, engine());
    dnnl::pooling_backward::primitive_desc bpd(d.bwd, attr, engine(), e->fpd);
    e->fwd = dnnl::pooling_forward(e->fpd);
    e->bwd = dnnl::pooling_backward(bpd);
    const memory::desc src = e->fpd.src_desc(), dst = e->fpd.dst_desc();
    e->src = unbound(src), e->dst = unbound(dst), e->diff_src = unbound(src), e->diff_dst = unbound(dst);
    if (g.max) e->ws = unbound(e->fpd.workspace_desc());
    e->scratch = unbound(e->fpd.scratchpad_desc());
    e->scratch_bwd = unbound(bpd.scratchpad_desc());
    return *entries_.emplace(g, std::move(e)).first->second;
  });
}

size_t OnednnPool::workspace_bytes(const PoolGeometry& g) { return g.max ? entry(g).ws.get_desc().get_size() : 0; }

namespace {
// e.ws bound to the caller's bytes, or to the entry's own.
const memory& bind_ws(memory& ws, memory& own, void* p) {
  if (p) return bind(ws, p);
  if (!own) own = owned(ws.get_desc());
  return bind(ws, own.get_data_handle());
}
}  // namespace

void OnednnPool::forward(const PoolGeometry& g, const float* x, float* y, uint64_t step, void* ws) {
  Entry& e = entry(g);
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, bind(e.src, x)}, {DNNL_ARG_DST, bind(e.dst, y)}, {DNNL_ARG_SCRATCHPAD, scratch(e.scratch)}};
  if (g.max) args.emplace(DNNL_ARG_WORKSPACE, bind_ws(e.ws, e.own_ws, ws));
  execute(e.fwd, args);
  e.ws_x = x, e.ws_step = step;
}

void OnednnPool::backward(const PoolGeometry& g, const float* x, const float* dy, float* dx, uint64_t step, void* ws) {
  Entry& e = entry(g);
  if (g.max && (e.ws_x != x || e.ws_step != step)) {  // the workspace is another input's: redo it
    if (!e.dst_scratch) e.dst_scratch = owned(e.fpd.dst_desc());
    forward(g, x, static_cast<float*>(e.dst_scratch.get_data_handle()), step, ws);
  }
  std::unordered_map<int, memory> args{
      {DNNL_ARG_DIFF_DST, bind(e.diff_dst, dy)}, {DNNL_ARG_DIFF_SRC, bind(e.diff_src, dx)},
      {DNNL_ARG_SCRATCHPAD, scratch(e.scratch_bwd)}};
  if (g.max) args.emplace(DNNL_ARG_WORKSPACE, bind_ws(e.ws, e.own_ws, ws));
  execute(e.bwd, args);
}

}  // namespace dp::kernels::cpu::onednn
