#include "kernels/cpu/onednn_matmul_bf16.h"

#include "kernels/cpu/cast.h"

namespace dp::kernels::cpu::onednn {
namespace {

memory::desc bf16_md(const memory::dims& dims, Tag tag) { return memory::desc(dims, memory::data_type::bf16, tag); }

// bf16 operands (x, W, dy: the casts), f32 bias and results (y, dx, dW); bf16(W) (out, in) read as
// (in, out) for the forward, bf16(dy) (M, O) as (O, M). Unpadded rows only (LinearMatmul::bf16).
LinearDescs bf16_descs(int64_t M, int64_t in, int64_t out, int64_t /*ld: out*/) {
  return {.x = bf16_md({M, in}, Tag::ab), .w_t = bf16_md({in, out}, Tag::ba), .b = plain_md({1, out}, Tag::ab),
          .y = plain_md({M, out}, Tag::ab), .dy = bf16_md({M, out}, Tag::ab), .w = bf16_md({out, in}, Tag::ab),
          .dx = plain_md({M, in}, Tag::ab), .dy_t = bf16_md({out, M}, Tag::ba), .dw = plain_md({out, in}, Tag::ab)};
}

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
    : in_(in), out_(out), prims_(std::move(where), in, out, bias, bf16_descs) {}

void Bf16Matmul::forward(float* y, const float* x, const float* w, const float* b, int64_t M, bool relu) {
  drop_casts();  // a new step (or an evaluation): every cast afresh
  if (M == 0) return;
  prims_.forward(y, x_.of(x, M * in_), w_.of(w, out_ * in_), b, M, relu);
}

void Bf16Matmul::backward_data(float* dx, const float* dy, const float* w, int64_t M) {
  if (M == 0) return;
  prims_.backward_data(dx, dy_.of(dy, M * out_), w_.of(w, out_ * in_), M);
}

void Bf16Matmul::backward_weights(float* dw, const float* dy, const float* x, int64_t M) {
  if (M == 0) return;
  prims_.backward_weights(dw, dy_.of(dy, M * out_), x_.of(x, M * in_), M);
}

}  // namespace dp::kernels::cpu::onednn
