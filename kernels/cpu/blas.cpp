#include "kernels/cpu/blas.h"

#include <cblas.h>

#include <algorithm>

namespace dp::kernels::cpu {

namespace {

// Up to this many multiply-adds OpenBLAS itself stays on one thread (its interface/gemm.c:
// M*N*K <= 65536 * GEMM_MULTITHREAD_THRESHOLD, the latter 4 by default), so a direct call's
// bits cannot depend on the thread count. Larger calls go through the sliced, parallel path.
constexpr int64_t kDirectWork = int64_t{65536} * 4;

// Slices of the longer side of C: at most kSlices, each a multiple of 16 and at least
// kMinSlice long: a function of the shape only.
constexpr int64_t kSlices = 8, kMinSlice = 64;

void blas(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
          int64_t ldb, float beta, float* C, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(M),
              static_cast<int>(N), static_cast<int>(K), alpha, A, static_cast<int>(lda), B, static_cast<int>(ldb),
              beta, C, static_cast<int>(ldc));
}

void blas(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
          const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(M),
              static_cast<int>(N), static_cast<int>(K), alpha, A, static_cast<int>(lda), B, static_cast<int>(ldb),
              beta, C, static_cast<int>(ldc));
}

template <typename T>
void gemm_impl(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
               int64_t ldb, T beta, T* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (M * N * K <= kDirectWork) {
    blas(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  const bool split_cols = N >= M;
  const int64_t len = split_cols ? N : M;
  const int64_t slice = std::max(kMinSlice, ((len + kSlices - 1) / kSlices + 15) / 16 * 16);
  const int64_t slices = (len + slice - 1) / slice;
  // Even a single slice runs inside the parallel region, so that OpenBLAS stays single-threaded.
  // Dynamic: on a shared machine a preempted thread's slices are picked up by the others.
  // Row-major: column j of op(B) starts at B + j (row j of B, B + j*ldb, when transposed); row i
  // of op(A) at A + i*lda (A + i when transposed).
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t s = 0; s < slices; ++s) {
    const int64_t b = s * slice, n = std::min(slice, len - b);
    if (split_cols)
      blas(ta, tb, M, n, K, alpha, A, lda, tb ? B + b * ldb : B + b, ldb, beta, C + b, ldc);
    else
      blas(ta, tb, n, N, K, alpha, ta ? A + b : A + b * lda, lda, B, ldb, beta, C + b * ldc, ldc);
  }
}

}  // namespace

void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
          int64_t ldb, float beta, float* C, int64_t ldc) {
  gemm_impl(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
          const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  gemm_impl(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gemm_in_task(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                  const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  blas(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace dp::kernels::cpu
