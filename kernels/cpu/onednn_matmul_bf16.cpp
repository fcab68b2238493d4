#include "kernels/cpu/onednn_matmul_bf16.h"

#include "kernels/cpu/cast.h"

namespace dp::kernels::cpu::onednn {
namespace {

memory::desc bf16_md(const memory::dims& dims, Tag tag) { return memory::desc(dims, memory::data_type::bf16, tag); }

}  // namespace

const uint16_t* Bf16Matmul::Cast::of(const float* src, int64_t n) {
  if (src != from || static_cast<int64_t>(data.size()) < n) {
    if (static_cast<int64_t>(data.size()) < n) data.resize(static_cast<size_t>(n));
    f32_to_bf16(data.data(), src, n);
    from = src;
  }
  return data.data();
}

Bf16Matmul::Bf16Matmul(std::string where, int64_t in, int64_t out, bool bias)
    : where_(std::move(where)), in_(in), out_(out), bias_(bias) {}

Bf16Matmul::Entry& Bf16Matmul::entry(int64_t M, bool relu) {
  const auto key = std::make_pair(M, relu);
  if (auto it = entries_.find(key); it != entries_.end()) return it->second;
  return onednn_call(where_, [&]() -> Entry& {
    Entry e;
    const memory::desc x = bf16_md({M, in_}, Tag::ab), dy = bf16_md({M, out_}, Tag::ab);
    const memory::desc y = plain_md({M, out_}, Tag::ab), dx = plain_md({M, in_}, Tag::ab);
    const memory::desc w_t = bf16_md({in_, out_}, Tag::ba);  // bf16(W) (out, in) read as (in, out)
    const memory::desc w = bf16_md({out_, in_}, Tag::ab), dy_t = bf16_md({out_, M}, Tag::ba);
    const memory::desc b = plain_md({1, out_}, Tag::ab), dw = plain_md({out_, in_}, Tag::ab);
    dnnl::matmul::primitive_desc fpd(bias_ ? dnnl::matmul::desc(x, w_t, b, y) : dnnl::matmul::desc(x, w_t, y),
                                     scratch_attr(relu), engine());
    dnnl::matmul::primitive_desc dpd(dnnl::matmul::desc(dy, w, dx), scratch_attr(false), engine());
    dnnl::primitive_attr acc = scratch_attr(false);
    dnnl::post_ops sum;
    sum.append_sum(1.0f);
    acc.set_post_ops(sum);
    dnnl::matmul::primitive_desc wpd(dnnl::matmul::desc(dy_t, x, dw), acc, engine());
    e.fwd = dnnl::matmul(fpd), e.bwd_d = dnnl::matmul(dpd), e.bwd_w = dnnl::matmul(wpd);
    e.x = unbound(x), e.w_t = unbound(w_t), e.b = unbound(b), e.y = unbound(y);
    e.dy = unbound(dy), e.w = unbound(w), e.dx = unbound(dx);
    e.dy_t = unbound(dy_t), e.x_w = unbound(x), e.dw = unbound(dw);
    e.scratch_f = unbound(fpd.scratchpad_desc());
    e.scratch_d = unbound(dpd.scratchpad_desc());
    e.scratch_w = unbound(wpd.scratchpad_desc());
    return entries_.emplace(key, std::move(e)).first->second;
  });
}

void Bf16Matmul::forward(float* y, const float* x, const float* w, const float* b, int64_t M, bool relu) {
  drop_casts();  // a new step (or an evaluation): every cast afresh
  if (M == 0) return;
  Entry& e = entry(M, relu);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, bind(e.x, x_.of(x, M * in_))},
                                       {DNNL_ARG_WEIGHTS, bind(e.w_t, w_.of(w, out_ * in_))},
                                       {DNNL_ARG_DST, bind(e.y, y)},
                                       {DNNL_ARG_SCRATCHPAD, scratch(e.scratch_f)}};
  if (bias_) args.emplace(DNNL_ARG_BIAS, bind(e.b, b));
  execute(e.fwd, args);
}

void Bf16Matmul::backward_data(float* dx, const float* dy, const float* w, int64_t M) {
  if (M == 0) return;
  Entry& e = entry(M, false);
  execute(e.bwd_d, {{DNNL_ARG_SRC, bind(e.dy, dy_.of(dy, M * out_))},
                    {DNNL_ARG_WEIGHTS, bind(e.w, w_.of(w, out_ * in_))},
                    {DNNL_ARG_DST, bind(e.dx, dx)},
                    {DNNL_ARG_SCRATCHPAD, scratch(e.scratch_d)}});
}

void Bf16Matmul::backward_weights(float* dw, const float* dy, const float* x, int64_t M) {
  if (M == 0) return;
  Entry& e = entry(M, false);
  execute(e.bwd_w, {{DNNL_ARG_SRC, bind(e.dy_t, dy_.of(dy, M * out_))},
                    {DNNL_ARG_WEIGHTS, bind(e.x_w, x_.of(x, M * in_))},
                    {DNNL_ARG_DST, bind(e.dw, dw)},
                    {DNNL_ARG_SCRATCHPAD, scratch(e.scratch_w)}});
}

}  // namespace dp::kernels::cpu::onednn
