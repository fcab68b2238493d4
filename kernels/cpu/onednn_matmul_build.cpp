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
    e.fwd = dnnl::matmul(fpd), e.bwd_d = dnnl::matmul(dpd), e.bwd_w = dnnl::matmul(wpd);
    e.x = unbound(d.x), e.w_t = unbound(d.w_t), e.b = unbound(d.b), e.y = unbound(d.y);
    e.dy = unbound(d.dy), e.w = unbound(d.w), e.dx = unbound(d.dx);
    e.dy_t = unbound(d.dy_t), e.x_w = unbound(d.x), e.dw = unbound(d.dw);
    e.scratch_f = unbound(fpd.scratchpad_desc());
    e.scratch_d = unbound(dpd.scratchpad_desc());
    e.scratch_w = unbound(wpd.scratchpad_desc());
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
  Entry& e = entry(M, false);
  execute(e.bwd_d, {{DNNL_ARG_SRC, bind(e.dy, dy)},
                    {DNNL_ARG_WEIGHTS, bind(e.w, w)},
                    {DNNL_ARG_DST, bind(e.dx, dx)},
                    {DNNL_ARG_SCRATCHPAD, scratch(e.scratch_d)}});
}

void LinearPrimitives::backward_weights(void* dw, const void* dy_t, const void* x, int64_t M) {
  Entry& e = entry(M, false);
  execute(e.bwd_w, {{DNNL_ARG_SRC, bind(e.dy_t, dy_t)},
                    {DNNL_ARG_WEIGHTS, bind(e.x_w, x)},
                    {DNNL_ARG_DST, bind(e.dw, dw)},
                    {DNNL_ARG_SCRATCHPAD, scratch(e.scratch_w)}});
}

}  // namespace dp::kernels::cpu::onednn
