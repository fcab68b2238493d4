// defines: MklStatus, mkl_load and mkl_gemm: Intel oneMKL's cblas_sgemm, loaded at run time from
// a directory (tools/setup.sh fetches a pinned MKL from PyPI into /opt/dptrain-deps/mkl-<version>/lib;
// runtime/cpu_gemm_choice.h says where, from DPTRAIN_MKL_DIR), for train.cpu_gemm = "mkl".
//
// Loaded, never linked, so the build and every run work without it, and RTLD_LOCAL, so its cblas_*
// symbols never take the place of OpenBLAS's (both export cblas_sgemm; the binary links OpenBLAS).
// MKL runs on its GNU threading layer (libmkl_gnu_thread: GOMP calls into the process's one libgomp
// pool, the pool oneDNN and OpenBLAS use), chosen before its first call; Intel's OpenMP runtime
// (libiomp5) is never loaded: setup.sh does not even unpack it. MKL splits a product over
// omp_get_max_threads() threads, so its bits are the same for a thread count (and a shape), not
// across thread counts (docs/cpu-performance.md: the measurements, and why MKL's conditional
// numerical reproducibility mode is not needed for that).
#pragma once
#include <cstdint>
#include <string>

namespace dp::kernels::cpu {

struct MklStatus {
  bool loaded = false;
  // MKL runs its own per-ISA kernels here (libmkl_avx512, libmkl_avx2: it dispatches them on Intel
  // CPUs only); elsewhere (AMD) it maps its generic libmkl_def, MKL_ENABLE_INSTRUCTIONS or not, and
  // was slower than oneDNN and OpenBLAS on every GPT product measured (docs/cpu-performance.md).
  bool own_kernels = false;
  std::string library;  // the file loaded (or tried)
  std::string version;  // MKL's own version string, when loaded
  std::string error;    // why not, when not loaded
};

// Loads libmkl_rt from `lib_dir` on the first call and returns the result; a process loads one
// MKL, so later calls return the first call's status whatever their `lib_dir`. Thread-safe.
const MklStatus& mkl_load(const std::string& lib_dir);
// Whether an earlier mkl_load succeeded; and whether it did on a CPU where MKL runs its own kernels.
bool mkl_loaded();
bool mkl_fast();

// C (M, N) = alpha * op(A) (M, K) @ op(B) (K, N) + beta * C, row-major, with leading dimensions,
// on MKL's threads (kernels/cpu/blas.h's gemm, on MKL). Internal error unless mkl_loaded().
void mkl_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
              const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

}  // namespace dp::kernels::cpu
