// defines: gemm, row-major C = alpha op(A) op(B) + beta C for float and double on OpenBLAS,
// parallelised by splitting C into slices fixed by the shape alone.
//
// Why not let OpenBLAS thread the call: its split (and so the bits of C) depends on the thread
// count; ours does not, so a run gives the same numbers on 1 or 16 cores. The project links
// OpenBLAS's OpenMP build (CMakeLists.txt), which runs single-threaded when called inside an
// active OpenMP region: each slice is one single-threaded OpenBLAS call over the full K, and
// the OpenMP threads share the slices. (Never call openblas_set_num_threads here: in the OpenMP
// build it calls omp_set_num_threads for the whole process.)
#pragma once
#include <cstdint>

namespace dp::kernels::cpu {

// C (M, N) = alpha * op(A) (M, K) @ op(B) (K, N) + beta * C, with leading dimensions.
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
          const double* B, int64_t ldb, double beta, double* C, int64_t ldc);

// One OpenBLAS call for a task of a parallel loop of the caller's: inside an active OpenMP region
// OpenBLAS (the OpenMP build) runs it on the calling thread, so the bits depend on the shape only.
// (Outside one, a large call would thread inside OpenBLAS: use gemm above there.) OpenBLAS keeps
// its buffers in a pool of its own: no heap allocation per call.
void gemm_in_task(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                  int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

}  // namespace dp::kernels::cpu
