// defines: the emulation build's stand-in for cuBLAS's API header: the handle, status, operation,
// compute-type and GEMM-algorithm types, and the calls the project makes — cublasCreate,
// cublasDestroy, cublasSetStream/GetStream, cublasGetStatusString and cublasGemmEx (column-major, f32 /
// bf16 / f16 data, f32 compute and scalars) — run on the host by kernels/cuda/emu/libs/. Written
// from the cuBLAS documentation with CUDA 12's numeric values, not copied from NVIDIA's headers.
// On the include path of the emulation targets only (kernels/cuda/emu/README.md, "Libraries").
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>
#include <library_types.h>

typedef enum {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_ARCH_MISMATCH = 8,
  CUBLAS_STATUS_MAPPING_ERROR = 11,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
  CUBLAS_STATUS_LICENSE_ERROR = 16,
} cublasStatus_t;

typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;

typedef enum {
  CUBLAS_COMPUTE_32F = 68,
  CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
} cublasComputeType_t;

typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;

typedef struct cublasContext* cublasHandle_t;

cublasStatus_t cublasCreate(cublasHandle_t* handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t* stream);
const char* cublasGetStatusString(cublasStatus_t status);

// C (m, n) = alpha op(A) (m, k) op(B) (k, n) + beta C, column-major, host pointer scalars of the
// compute type's scale type (float for both compute types here).
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType_t Atype, int lda, const void* B,
                            cudaDataType_t Btype, int ldb, const void* beta, void* C, cudaDataType_t Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo);
