#include "kernels/cpu/onednn_matmul.h"

#include <omp.h>

#include <algorithm>

#include "kernels/host_device.h"
#include "kernels/cpu/blas.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/mkl_gemm.h"
#include "kernels/cpu/onednn_matmul_bf16.h"

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

Bf16Matmul& LinearMatmul::bf16() {
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
  if (lib != GemmLibrary::Onednn) {
    blas_gemm(lib, false, true, M, out_, in_, x, in_, w, in_, 0.0f, y, out_);  // x (M, I) W^T (I, O)
    return bias_relu(y, bias_ ? b : nullptr, M, out_, relu);
  }
  Entry& e = entry(M, relu);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, bind(e.x, x)},
                                       {DNNL_ARG_WEIGHTS, bind(e.w_t, w)},
                                       {DNNL_ARG_DST, bind(e.y, y)},
                                       {DNNL_ARG_SCRATCHPAD, scratch(e.scratch_f)}};
  if (bias_) args.emplace(DNNL_ARG_BIAS, bind(e.b, b));
  execute(e.fwd, args);
}

void LinearMatmul::backward_data(GemmLibrary lib, float* dx, const float* dy, const float* w, int64_t M) {
  if (M == 0) return;
  if (lib == GemmLibrary::OnednnBf16) return bf16().backward_data(dx, dy, w, M);
  if (lib != GemmLibrary::Onednn) return blas_gemm(lib, false, false, M, in_, out_, dy, out_, w, in_, 0.0f, dx, in_);
  Entry& e = entry(M, false);
  execute(e.bwd_d, {{DNNL_ARG_SRC, bind(e.dy, dy)},
                    {DNNL_ARG_WEIGHTS, bind(e.w, w)},
                    {DNNL_ARG_DST, bind(e.dx, dx)},
                    {DNNL_ARG_SCRATCHPAD, scratch(e.scratch_d)}});
}

void LinearMatmul::backward_weights(GemmLibrary lib, float* dw, float* db, const float* dy, const float* x,
                                    int64_t M) {
  if (M == 0) return;
  if (lib == GemmLibrary::OnednnBf16) {
    bf16().backward_weights(dw, dy, x, M);
  } else if (lib != GemmLibrary::Onednn) {
    blas_gemm(lib, true, false, out_, in_, M, dy, out_, x, in_, 1.0f, dw, in_);  // dW (O, I) += dy^T x
  } else {
    Entry& e = entry(M, false);
    execute(e.bwd_w, {{DNNL_ARG_SRC, bind(e.dy_t, dy)},
                      {DNNL_ARG_WEIGHTS, bind(e.x_w, x)},
                      {DNNL_ARG_DST, bind(e.dw, dw)},
                      {DNNL_ARG_SCRATCHPAD, scratch(e.scratch_w)}});
  }
  if (db) bias_grad_add(db, dy, M, out_);
}

namespace {

// acc (n) += columns [c0, c0 + n) of each of dy's M rows (M, O), the rows in order. Vectorised
// over the columns only: every column's sum is the same additions in the same order on any clone.
[[gnu::always_inline]] inline void add_rows_f64_body(double* acc, const float* dy, int64_t M, int64_t O, int64_t c0,
                                                     int64_t n) {
  for (int64_t m = 0; m < M; ++m) {
    const float* row = dy + m * O + c0;
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) acc[c] += row[c];
  }
}
DP_VECTOR_CLONES(void, add_rows_f64, (double* acc, const float* dy, int64_t M, int64_t O, int64_t c0, int64_t n),
                 (acc, dy, M, O, c0, n))

}  // namespace

void bias_grad_add(float* db, const float* dy, int64_t M, int64_t O) {
  // Slabs of columns, one per thread where O allows (at most kSlab, so the f64 sums stay in L1):
  // each slab streams the rows in order, contiguous reads, and no two threads share a column.
  // A column's sum does not depend on the slab width, so the result is the same on any thread
  // count. (Blocks of 64 columns read the rows 256 bytes at a time, 3-4x slower at M = 4096.)
  constexpr int64_t kSlab = 512, kAlign = 16;
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
