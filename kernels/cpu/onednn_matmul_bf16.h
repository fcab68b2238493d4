// defines: Bf16Matmul, LinearMatmul's products (kernels/cpu/onednn_matmul.h) with bf16 operands
// and f32 accumulation and results: train.precision = "bf16" on the CPU, torch.autocast("cpu",
// dtype=torch.bfloat16)'s linear. The f32 operands are rounded to bf16 (nearest even) per call:
//   forward          y (M, O) f32 = bf16(x) bf16(W)^T + b        (bias f32, optional ReLU)
//   backward_data    dx (M, I) f32 = bf16(dy) bf16(W)
//   backward_weights dW (O, I) f32 += bf16(dy)^T bf16(x)           (oneDNN's sum post-op)
// Each cast is made once per step where two products share it: forward keeps bf16(x) for the
// weight gradient and bf16(W) for the data gradient (the weights change only after the backward),
// and the first of the two backward products keeps bf16(dy) for the second. A kept cast is used
// only for the same buffer, and forward drops the casts of the step before, so nothing stale
// outlives a step (drop_casts: for a caller that refills an input without calling forward).
// oneDNN runs bf16 matmuls with AVX-512-BF16 or AMX (kernels/cpu/bf16_isa.h: training is refused
// on a CPU without them). Deterministic for a thread count, as the f32 primitives.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/onednn_matmul_build.h"

namespace dp::kernels::cpu::onednn {

class Bf16Matmul {
 public:
  Bf16Matmul(std::string where, int64_t in, int64_t out, bool bias);
  void forward(float* y, const float* x, const float* w, const float* b, int64_t M, bool relu);
  void backward_data(float* dx, const float* dy, const float* w, int64_t M);
  void backward_weights(float* dw, const float* dy, const float* x, int64_t M);
  void drop_casts() { x_.from = w_.from = dy_.from = nullptr; }

 private:
  // A bf16 copy of an f32 buffer, and which buffer it was cast from (null: none kept).
  struct Cast {
    std::vector<uint16_t> data;
    const float* from = nullptr;
    const uint16_t* of(const float* src, int64_t n);  // casts src unless it is `from`'s copy
  };
  int64_t in_, out_;
  LinearPrimitives prims_;  // bf16 operands, f32 bias and results
  Cast x_, w_, dy_;
};

}  // namespace dp::kernels::cpu::onednn
