#include "kernels/cpu/onednn_matmul.h"

#include <omp.h>

#include <algorithm>

#include "kernels/host_device.h"
#include "kernels/cpu/blas.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/mkl_gemm.h"
#include "kernels/cpu/onednn_matmul_bf16.h"

namespace dp::kernels::cpu::onednn {

namespace {

// f32 operands; our (out, in) weight read as (in, out) for the forward, dy (M, O) as (O, M); y and
// dy in rows of ld (ld > out: a padded output, its strides given; else the plain layout).
LinearDescs f32_descs(int64_t M, int64_t in, int64_t out, int64_t ld) {
  const memory::desc x = plain_md({M, in}, Tag::ab);
  const memory::desc y = ld > out ? memory::desc({M, out}, memory::data_type::f32, memory::dims{ld, 1})
                                  : plain_md({M, out}, Tag::ab);
  const memory::desc dy_t = ld > out ? memory::desc({out, M}, memory::data_type::f32, memory::dims{1, ld})
                                     : plain_md({out, M}, Tag::ba);
  const memory::desc w = plain_md({out, in}, Tag::ab);
  return {.x = x, .w_t = plain_md({in, out}, Tag::ba), .b = plain_md({1, out}, Tag::ab), .y = y,
          .dy = y, .w = w, .dx = x, .dy_t = dy_t, .dw = w};
}

// y's padding, columns [out, ld) of each of its M rows, set to 0.
void zero_padding(float* y, int64_t M, int64_t out, int64_t ld) {
  if (ld == out) return;
  for (int64_t m = 0; m < M; ++m) std::fill(y + m * ld + out, y + (m + 1) * ld, 0.0f);
}

}  // namespace

LinearMatmul::LinearMatmul(std::string where, int64_t in, int64_t out, bool bias, int64_t ld_out)
    : where_(std::move(where)), in_(in), out_(out), ld_(ld_out > 0 ? ld_out : out), bias_(bias),
      f32_(where_, in, out, bias, f32_descs, ld_) {
  DP_CHECK(ld_ >= out_ && (ld_ == out_ || !bias_), "{}: output row stride {} for {} outputs{}", where_, ld_, out_,
           bias_ ? " with a bias (a padded output takes none)" : "");
}

Bf16Matmul& LinearMatmul::bf16() {
  DP_CHECK(ld_ == out_, "{}: a padded output (row stride {} for {} outputs) on the bf16 matmul", where_, ld_, out_);
  if (!bf16_) bf16_.emplace(where_, in_, out_, bias_);
  return *bf16_;
}

void LinearMatmul::drop_bf16_casts() {
  if (bf16_) bf16_->drop_casts();
}

namespace {

// y (M, O) += b per row, then max(., 0) with relu: one pass, rows split over the threads.
void bias_relu(float* y, const float* b, int64_t M, int64_t O, bool relu) {
  if (b == nullptr && !relu) return;
#pragma omp parallel for schedule(static) if (M * O > (1 << 16))
  for (int64_t m = 0; m < M; ++m) {
    float* row = y + m * O;
    if (b != nullptr)
#pragma omp simd
      for (int64_t o = 0; o < O; ++o) row[o] += b[o];
    if (relu)
#pragma omp simd
      for (int64_t o = 0; o < O; ++o) row[o] = row[o] > 0.0f ? row[o] : 0.0f;
  }
}

// The BLAS-style libraries' product: OpenBLAS through blas.h's shape-fixed slices, MKL as one call.
void blas_gemm(GemmLibrary lib, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (lib == GemmLibrary::Mkl) return mkl_gemm(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
  gemm(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace

void LinearMatmul::forward(GemmLibrary lib, float* y, const float* x, const float* w, const float* b, int64_t M,
                           bool relu) {
  if (M == 0) return;
  if (lib == GemmLibrary::OnednnBf16) return bf16().forward(y, x, w, bias_ ? b : nullptr, M, relu);
  DP_CHECK(ld_ == out_ || !relu, "{}: a ReLU on a padded output", where_);
  if (lib != GemmLibrary::Onednn) {
    blas_gemm(lib, false, true, M, out_, in_, x, in_, w, in_, 0.0f, y, ld_);  // x (M, I) W^T (I, O)
    zero_padding(y, M, out_, ld_);
    return bias_relu(y, bias_ ? b : nullptr, M, out_, relu);
  }
  f32_.forward(y, x, w, b, M, relu);
  zero_padding(y, M, out_, ld_);
}

void LinearMatmul::backward_data(GemmLibrary lib, float* dx, const float* dy, const float* w, int64_t M) {
  if (M == 0) return;
  if (lib == GemmLibrary::OnednnBf16) return bf16().backward_data(dx, dy, w, M);
  if (lib != GemmLibrary::Onednn) return blas_gemm(lib, false, false, M, in_, out_, dy, ld_, w, in_, 0.0f, dx, in_);
  f32_.backward_data(dx, dy, w, M);
}

void LinearMatmul::backward_weights(GemmLibrary lib, float* dw, float* db, const float* dy, const float* x,
                                    int64_t M) {
  if (M == 0) return;
  if (lib == GemmLibrary::OnednnBf16) {
    bf16().backward_weights(dw, dy, x, M);
  } else if (lib != GemmLibrary::Onednn) {
    blas_gemm(lib, true, false, out_, in_, M, dy, ld_, x, in_, 1.0f, dw, in_);  // dW (O, I) += dy^T x
  } else {
    f32_.backward_weights(dw, dy, x, M);
  }
  if (db) bias_grad_add(db, dy, M, out_);
}

namespace {

// acc (n) += columns [c0, c0 + n) of each of dy's M rows (M, O), the rows in order. Vectorised
// over the columns only: every column's sum is the same additions in the same order on any clone.
// A slab narrower than the row reads a piece of each row and jumps: the hardware prefetcher loses
// the stream at every page (9-10 GB/s against 34 for whole rows, one Zen 5 core), so such a slab
// asks for the piece kAhead rows on itself (22-28 GB/s).
[[gnu::always_inline]] inline void add_rows_f64_body(double* acc, const float* dy, int64_t M, int64_t O, int64_t c0,
                                                     int64_t n) {
  constexpr int64_t kAhead = 4, kLine = 16;  // rows ahead; floats in a 64-byte line
  const bool piece = n < O;
  for (int64_t m = 0; m < M; ++m) {
    const float* row = dy + m * O + c0;
    if (piece && m + kAhead < M)
      for (int64_t c = 0; c < n; c += kLine) __builtin_prefetch(row + kAhead * O + c);
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) acc[c] += row[c];
  }
}
DP_VECTOR_CLONES(void, add_rows_f64, (double* acc, const float* dy, int64_t M, int64_t O, int64_t c0, int64_t n),
                 (acc, dy, M, O, c0, n))

}  // namespace

void bias_grad_add(float* db, const float* dy, int64_t M, int64_t O) {
  // Slabs of columns, one per thread where O allows (at most kSlab: the f64 sums, 16 KiB, stay in
  // any of these cores' L1): each slab streams the rows in order, and no two threads share a
  // column. One thread takes whole rows up to kSlab columns (GPT's widest, 1,536, 3.5x faster than
  // in slabs of 512). A column's sum does not depend on the slab width, so the result is the same
  // on any thread count. (Blocks of 64 columns read the rows 256 bytes at a time, 3-4x slower.)
  constexpr int64_t kSlab = 2048, kAlign = 16;
  const int64_t threads = M * O > (1 << 15) ? omp_get_max_threads() : 1;
  const int64_t even = ((O + threads - 1) / threads + kAlign - 1) / kAlign * kAlign;
  const int64_t width = std::clamp<int64_t>(even, kAlign, kSlab), slabs = (O + width - 1) / width;
#pragma omp parallel for schedule(static) if (threads > 1)
  for (int64_t k = 0; k < slabs; ++k) {
    const int64_t c0 = k * width, n = std::min(width, O - c0);
    double acc[kSlab] = {};
    add_rows_f64(acc, dy, M, O, c0, n);
    for (int64_t c = 0; c < n; ++c) db[c0 + c] += static_cast<float>(acc[c]);
  }
}

}  // namespace dp::kernels::cpu::onednn
