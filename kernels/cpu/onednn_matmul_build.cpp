#include "kernels/cpu/onednn_matmul_build.h"

namespace dp::kernels::cpu::onednn {

LinearPrimitives::LinearPrimitives(std::string where, int64_t in, int64_t out, bool bias, LinearDescsFn descs,
                                   int64_t ld_out)
    : where_(std::move(where)), in_(in), out_(out), ld_out_(ld_out > 0 ? ld_out : out), bias_(bias), descs_(descs) {}

LinearPrimitives::Entry& LinearPrimitives::entry(int64_t M, bool relu) {
  const auto key = std::make_pair(M, relu);
  if (auto it = entries_.find(key); it != entries_.end()) return it->second;
  return onednn_call(where_, [&]() -> Entry& {
    Entry e;
    const LinearDescs d = descs_(M, in_, out_, ld_out_);
    dnnl::matmul::primitive_desc fpd(bias_ ? dnnl::matmul::desc(d.x, d.w_t, d.b, d.y)
                                           : dnnl::matmul::desc(d.x, d.w_t, d.y),
                                     scratch_attr(relu), engine());
    dnnl::matmul::primitive_desc dpd(dnnl::matmul::desc(d.dy, d.w, d.dx), scratch_attr(false), engine());
    dnnl::primitive_attr acc = scratch_attr(false);
    dnnl::post_ops sum;
    sum.append_sum(1.0f);
    acc.set_post_ops(sum);
    dnnl::matmul::primitive_desc wpd(dnnl::matmul::desc(d.dy_t, d.x, d.dw), acc, engine());
    e.fwd = dnnl::matmul(fpd);
    e.x = unbound(d.x), e.w_t = unbound(d.w_t), e.b = unbound(d.b), e.y = unbound(d.y);
    e.scratch_f = unbound(fpd.scratchpad_desc());
    e.bwd_d = Product(dpd, d.dy, d.w, d.dx);
    e.bwd_w = Product(wpd, d.dy_t, d.x, d.dw);
    return entries_.emplace(key, std::move(e)).first->second;
  });
}

void LinearPrimitives::forward(void* y, const void* x, const void* w_t, const void* b, int64_t M, bool relu) {
  Entry& e = entry(M, relu);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, bind(e.x, x)},
                                       {DNNL_ARG_WEIGHTS, bind(e.w_t, w_t)},
                                       {DNNL_ARG_DST, bind(e.y, y)},
                                       {DNNL_ARG_SCRATCHPAD, scratch(e.scratch_f)}};
  if (bias_) args.emplace(DNNL_ARG_BIAS, bind(e.b, b));
  execute(e.fwd, args);
}

void LinearPrimitives::backward_data(void* dx, const void* dy, const void* w, int64_t M) {
  entry(M, false).bwd_d.run(dx, dy, w);
}

void LinearPrimitives::backward_weights(void* dw, const void* dy_t, const void* x, int64_t M) {
  entry(M, false).bwd_w.run(dw, dy_t, x);
}

LinearPrimitives::Product::Product(const dnnl::matmul::primitive_desc& pd, const memory::desc& src_md,
                                   const memory::desc& weights_md, const memory::desc& dst_md)
    : prim(pd), src(unbound(src_md)), weights(unbound(weights_md)), dst(unbound(dst_md)),
      pad(unbound(pd.scratchpad_desc())) {}

void LinearPrimitives::Product::run(void* dst_p, const void* src_p, const void* weights_p) {
  execute(prim, {{DNNL_ARG_SRC, bind(src, src_p)},
                 {DNNL_ARG_WEIGHTS, bind(weights, weights_p)},
                 {DNNL_ARG_DST, bind(dst, dst_p)},
                 {DNNL_ARG_SCRATCHPAD, scratch(pad)}});
}

}  // namespace dp::kernels::cpu::onednn
