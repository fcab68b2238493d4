// defines: GemmLibrary, and LinearMatmul, a fully connected product on oneDNN's matmul primitive,
// OpenBLAS's sgemm or MKL's (kernels/cpu/mkl_gemm.h, when loaded), the projection every layer with nn.Linear's (out, in) weight shares on the
// oneDNN backend (linear, the attention's c_attn and c_proj):
//   forward          y (M, O) = x (M, I) W^T + b      (bias and an optional ReLU in the epilogue)
//   backward_data    dx (M, I) = dy (M, O) W (O, I)   (overwritten)
//   backward_weights dW (O, I) += dy^T x              (oneDNN's sum post-op: straight into the
//                    gradient arena), db (O) += column sums of dy (f64 sums, rows in order)
// Our buffers are used as they are (W read transposed through its strides: no weight reorder);
// primitives are made once per (M, ReLU). Deterministic for a thread count (kernels/cpu/onednn.h).
// On OpenBLAS (kernels/cpu/blas.h gemm: slices fixed by the shape, the same bits on any thread
// count; buffers pooled, nothing allocated per call) the bias and the ReLU follow the product in
// one pass over y; the bias gradient is the same f64 column sum either way. On MKL the same, its
// one cblas_sgemm per product threaded by MKL over the OpenMP pool (the same bits for a thread count).
// Measured against inner product on this project's 2-core machine (GPT's shapes, M = 4096):
// about 1.5x faster over forward + backward, mostly in the weight gradient.
#pragma once
#include <cstdint>
#include <string>

#include "base/pimpl_ptr.h"
#include "kernels/cpu/onednn_matmul_build.h"

namespace dp::kernels::cpu::onednn {

// Which library a LinearMatmul call runs on (chosen by models/layers/linear/linear_gemm_choice.h);
// OnednnBf16: oneDNN's matmul on bf16 operands with f32 results (onednn_matmul_bf16.h).
enum class GemmLibrary { Onednn, Openblas, Mkl, OnednnBf16 };

class Bf16Matmul;

class LinearMatmul {
 public:
  // `where` names the user in oneDNN's errors ("layer 'fc1' (linear)"). ld_out: the row stride of
  // y and dy (0: out; else > out: a padded output, models/layers/linear/linear.h pad_out_to, on
  // the f32 libraries without bias or ReLU): the columns [out, ld_out) of y are written 0 and
  // those of dy never read.
  LinearMatmul(std::string where, int64_t in, int64_t out, bool bias, int64_t ld_out = 0);
  void forward(GemmLibrary lib, float* y, const float* x, const float* w, const float* b, int64_t M,
               bool relu = false);
  void backward_data(GemmLibrary lib, float* dx, const float* dy, const float* w, int64_t M);
  void backward_weights(GemmLibrary lib, float* dw, float* db, const float* dy, const float* x, int64_t M);
  // OnednnBf16: forgets the bf16 casts kept for the backward (a caller that recomputes this
  // product's input without running forward, whose casts would otherwise be stale).
  void drop_bf16_casts();

 private:
  std::string where_;
  int64_t in_, out_, ld_;  // ld_: y's and dy's row stride
  bool bias_;
  LinearPrimitives f32_;  // the Onednn path's primitives
  Bf16Matmul& bf16();  // made on the first OnednnBf16 call
  PimplPtr<Bf16Matmul> bf16_;
};

// db (O) += sum over the M rows of dy (M, O), each column summed in f64 in row order.
void bias_grad_add(float* db, const float* dy, int64_t M, int64_t O);

}  // namespace dp::kernels::cpu::onednn
