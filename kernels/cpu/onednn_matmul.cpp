#include "kernels/cpu/onednn_matmul.h"

#include <omp.h>

#include <algorithm>

namespace dp::kernels::cpu::onednn {

LinearMatmul::LinearMatmul(std::string where, int64_t in, int64_t out, bool bias)
    : where_(std::move(where)), in_(in), out_(out), bias_(bias) {}

LinearMatmul::Entry& LinearMatmul::entry(int64_t M, bool relu) {
  const auto key = std::make_pair(M, relu);
  if (auto it = entries_.find(key); it != entries_.end()) return it->second;
  return onednn_call(where_, [&]() -> Entry& {
    Entry e;
    const memory::desc x = plain_md({M, in_}, Tag::ab), y = plain_md({M, out_}, Tag::ab);
    const memory::desc w_t = plain_md({in_, out_}, Tag::ba);  // our (out, in) buffer read as (in, out)
    const memory::desc w = plain_md({out_, in_}, Tag::ab), dy_t = plain_md({out_, M}, Tag::ba);
    const memory::desc b = plain_md({1, out_}, Tag::ab);
    dnnl::matmul::primitive_desc fpd(bias_ ? dnnl::matmul::desc(x, w_t, b, y) : dnnl::matmul::desc(x, w_t, y),
                                     scratch_attr(relu), engine());
    dnnl::matmul::primitive_desc dpd(dnnl::matmul::desc(y, w, x), scratch_attr(false), engine());
    dnnl::primitive_attr acc = scratch_attr(false);
    dnnl::post_ops sum;
    sum.append_sum(1.0f);
    acc.set_post_ops(sum);
    dnnl::matmul::primitive_desc wpd(dnnl::matmul::desc(dy_t, x, w), acc, engine());
    e.fwd = dnnl::matmul(fpd), e.bwd_d = dnnl::matmul(dpd), e.bwd_w = dnnl::matmul(wpd);
    e.x = unbound(x), e.w_t = unbound(w_t), e.b = unbound(b), e.y = unbound(y);
    e.dy = unbound(y), e.w = unbound(w), e.dx = unbound(x);
    e.dy_t = unbound(dy_t), e.x_w = unbound(x), e.dw = unbound(w);
    e.scratch_f = unbound(fpd.scratchpad_desc());
    e.scratch_d = unbound(dpd.scratchpad_desc());
    e.scratch_w = unbound(wpd.scratchpad_desc());
    return entries_.emplace(key, std::move(e)).first->second;
  });
}

void LinearMatmul::forward(float* y, const float* x, const float* w, const float* b, int64_t M, bool relu) {
  if (M == 0) return;
  Entry& e = entry(M, relu);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, bind(e.x, x)},
                                       {DNNL_ARG_WEIGHTS, bind(e.w_t, w)},
                                       {DNNL_ARG_DST, bind(e.y, y)},
                                       {DNNL_ARG_SCRATCHPAD, scratch(e.scratch_f)}};
  if (bias_) args.emplace(DNNL_ARG_BIAS, bind(e.b, b));
  execute(e.fwd, args);
}

void LinearMatmul::backward_data(float* dx, const float* dy, const float* w, int64_t M) {
  if (M == 0) return;
  Entry& e = entry(M, false);
  execute(e.bwd_d, {{DNNL_ARG_SRC, bind(e.dy, dy)},
                    {DNNL_ARG_WEIGHTS, bind(e.w, w)},
                    {DNNL_ARG_DST, bind(e.dx, dx)},
                    {DNNL_ARG_SCRATCHPAD, scratch(e.scratch_d)}});
}

void LinearMatmul::backward_weights(float* dw, float* db, const float* dy, const float* x, int64_t M) {
  if (M == 0) return;
  Entry& e = entry(M, false);
  execute(e.bwd_w, {{DNNL_ARG_SRC, bind(e.dy_t, dy)},
                    {DNNL_ARG_WEIGHTS, bind(e.x_w, x)},
                    {DNNL_ARG_DST, bind(e.dw, dw)},
                    {DNNL_ARG_SCRATCHPAD, scratch(e.scratch_w)}});
  if (db) bias_grad_add(db, dy, M, out_);
}

void bias_grad_add(float* db, const float* dy, int64_t M, int64_t O) {
  // Blocks of 64 columns: the rows stream through in order, each block's sums stay in registers
  // and cache (vectorised over the columns), and no two threads share a column.
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (O + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (M * O > (1 << 15))
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t c0 = blk * kBlock, n = std::min(kBlock, O - c0);
    double acc[kBlock] = {};
    for (int64_t m = 0; m < M; ++m) {
      const float* row = dy + m * O + c0;
      for (int64_t c = 0; c < n; ++c) acc[c] += row[c];
    }
    for (int64_t c = 0; c < n; ++c) db[c0 + c] += static_cast<float>(acc[c]);
  }
}

}  // namespace dp::kernels::cpu::onednn
