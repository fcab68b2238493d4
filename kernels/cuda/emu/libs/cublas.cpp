// The emulated cuBLAS (kernels/cuda/emu/include/cublas_api.h): handles bound to a stream, and
// cublasGemmEx checked as the cuBLAS documentation states its preconditions, then run on the host
// (gemm.h) at enqueue, like every emulated stream operation.
#include <cublas_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "kernels/cuda/emu/libs/elements.h"
#include "kernels/cuda/emu/libs/gemm.h"
#include "kernels/cuda/emu/libs/handles.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
};

namespace dp::emu::libs {
namespace {

// Why a GEMM's arguments break cuBLAS's documented preconditions ("" when they do not).
std::string gemm_ex_problem(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, cudaDataType_t at,
                            int lda, cudaDataType_t bt, int ldb, cudaDataType_t ct, int ldc,
                            cublasComputeType_t compute) {
  if (ta == CUBLAS_OP_C || tb == CUBLAS_OP_C || (ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) ||
      (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T))
    return fmt::format("transa {} / transb {}: only N and T are emulated", static_cast<int>(ta), static_cast<int>(tb));
  if (m < 0 || n < 0 || k < 0) return fmt::format("negative size m={} n={} k={}", m, n, k);
  if (at != bt || at != ct || element_bytes(at) == 0)
    return fmt::format("types A {} B {} C {}: one of f32, bf16, f16 for all three is emulated", static_cast<int>(at),
                       static_cast<int>(bt), static_cast<int>(ct));
  if (compute != CUBLAS_COMPUTE_32F && !(compute == CUBLAS_COMPUTE_32F_FAST_TF32 && at == CUDA_R_32F))
    return fmt::format("compute type {} with data type {}", static_cast<int>(compute), static_cast<int>(at));
  const int a_rows = ta == CUBLAS_OP_N ? m : k, b_rows = tb == CUBLAS_OP_N ? k : n;
  if (lda < std::max(1, a_rows)) return fmt::format("lda {} < max(1, {})", lda, a_rows);
  if (ldb < std::max(1, b_rows)) return fmt::format("ldb {} < max(1, {})", ldb, b_rows);
  if (ldc < std::max(1, m)) return fmt::format("ldc {} < max(1, {})", ldc, m);
  return "";
}

}  // namespace
}  // namespace dp::emu::libs

using dp::emu::libs::library_refusal;
namespace L = dp::emu::libs;

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  return L::make_object(handle, CUBLAS_STATUS_SUCCESS, CUBLAS_STATUS_INVALID_VALUE, "cublasCreate");
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  return L::destroy_object(handle, CUBLAS_STATUS_SUCCESS, CUBLAS_STATUS_NOT_INITIALIZED, "cublasDestroy");
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  return L::bind_stream(handle, stream, CUBLAS_STATUS_SUCCESS, CUBLAS_STATUS_NOT_INITIALIZED,
                        CUBLAS_STATUS_INVALID_VALUE, "cublasSetStream");
}

cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t* stream) {
  return L::bound_stream(handle, stream, CUBLAS_STATUS_SUCCESS, CUBLAS_STATUS_NOT_INITIALIZED, "cublasGetStream");
}

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType_t Atype, int lda, const void* B,
                            cudaDataType_t Btype, int ldb, const void* beta, void* C, cudaDataType_t Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t /*algo*/) {
  constexpr const char* kCall = "cublasGemmEx";
  if (handle == nullptr) return library_refusal(CUBLAS_STATUS_NOT_INITIALIZED, kCall, "null handle");
  if (const std::string why = L::gemm_ex_problem(transa, transb, m, n, k, Atype, lda, Btype, ldb, Ctype, ldc,
                                                 computeType);
      !why.empty())
    return library_refusal(CUBLAS_STATUS_INVALID_VALUE, kCall, why);
  if (alpha == nullptr || beta == nullptr) return library_refusal(CUBLAS_STATUS_INVALID_VALUE, kCall, "null scalar");
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  const float a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
  const bool ta = transa == CUBLAS_OP_T, tb = transb == CUBLAS_OP_T;
  const int64_t a_span = L::matrix_span(ta ? k : m, ta ? m : k, lda);  // 0 when k is
  const int64_t b_span = L::matrix_span(tb ? n : k, tb ? k : n, ldb);
  if (!L::in_device_memory(A, Atype, a_span) || !L::in_device_memory(B, Btype, b_span) ||
      !L::in_device_memory(C, Ctype, L::matrix_span(m, n, ldc)))
    return library_refusal(CUBLAS_STATUS_INVALID_VALUE, kCall,
                           fmt::format("an operand of m={} n={} k={} (lda {} ldb {} ldc {}) leaves its device "
                                       "allocation",
                                       m, n, k, lda, ldb, ldc));
  const std::vector<float> acc = L::column_major_product(m, n, k, L::Operand{A, Atype, lda, ta},
                                                         L::Operand{B, Btype, ldb, tb},
                                                         computeType == CUBLAS_COMPUTE_32F_FAST_TF32);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) {
      const int64_t at = j * ldc + i;
      float v = a * acc[static_cast<size_t>(j * m + i)];
      if (b != 0.0f) v += b * L::load(C, Ctype, at);  // beta 0: C is not read (it may hold NaN)
      L::store(C, Ctype, at, v);
    }
  return CUBLAS_STATUS_SUCCESS;
}
