// The emulated math libraries (kernels/cuda/emu/libs/): cublasGemmEx and cublasLtMatmul against a
// double-precision column-major product, and the documented preconditions they enforce, each
// refused with CUBLAS_STATUS_INVALID_VALUE: an attribute of the wrong size, a layout whose leading
// dimension is below its rows, transposes that do not fit D, an operand less aligned than its
// algorithm was chosen for, a workspace below the algorithm's need, an operand outside device
// memory, a GELU input whose leading dimension is not a multiple of 8. C is not read at beta 0.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "tests/kernels/emu/emu_test_util.h"

namespace dp::emu::test {
namespace {

// Column-major op(A) op(B) in double: op(X)(r, c) = X[c ld + r], or X[r ld + c] transposed.
std::vector<double> product(int m, int n, int k, const std::vector<float>& a, int lda, bool ta,
                            const std::vector<float>& b, int ldb, bool tb) {
  std::vector<double> d(static_cast<size_t>(m * n));
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      double s = 0;
      for (int p = 0; p < k; ++p)
        s += double(ta ? a[i * lda + p] : a[p * lda + i]) * double(tb ? b[p * ldb + j] : b[j * ldb + p]);
      d[j * m + i] = s;
    }
  return d;
}

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>((i * 7919) % 23) - 1.0f;
  return v;
}

TEST(EmuCublas, GemmExIsTheColumnMajorProductAndChecksLeadingDimensions) {
  cublasHandle_t h = nullptr;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSetStream(h, cudaStreamPerThread), CUBLAS_STATUS_SUCCESS);
  const int m = 5, n = 3, k = 4, lda = 6, ldb = 4, ldc = 7;  // A (m, k) in columns of 6, B^T stored (n, k)
  const auto a = ramp(lda * k, 0.25f), b = ramp(ldb * k, 0.5f), c0 = ramp(ldc * n, 1.0f);
  DeviceArray<float> da(a), db(b), dc(c0);
  const float alpha = 2.0f, beta = 0.5f;
  ASSERT_EQ(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, &alpha, da.get(), CUDA_R_32F, lda, db.get(), CUDA_R_32F,
                         ldb, &beta, dc.get(), CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  const auto want = product(m, n, k, a, lda, false, b, ldb, true);
  const auto got = dc.download();
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < ldc; ++i)
      EXPECT_NEAR(got[j * ldc + i], i < m ? alpha * want[j * m + i] + beta * c0[j * ldc + i] : c0[j * ldc + i], 1e-5)
          << i << "," << j;  // rows past m untouched
  EXPECT_EQ(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, &alpha, da.get(), CUDA_R_32F, m - 1, db.get(),
                         CUDA_R_32F, ldb, &beta, dc.get(), CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_INVALID_VALUE);  // lda < m
  EXPECT_EQ(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, da.get(), CUDA_R_32F, lda, db.get(), CUDA_R_32F,
                         ldb, &beta, dc.get(), CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);  // B read (k, n) with ld 4: inside its 16 elements
  EXPECT_EQ(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n + 1, k, &alpha, da.get(), CUDA_R_32F, lda, db.get(),
                         CUDA_R_32F, ldb, &beta, dc.get(), CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_INVALID_VALUE);  // C's 4th column leaves its allocation (B's 16 elements just fit)
  EXPECT_EQ(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, da.get(), CUDA_R_32F, lda, db.get(), CUDA_R_32F,
                         7, &beta, dc.get(), CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_INVALID_VALUE);  // only B leaves its 16 elements: (3 - 1) 7 + 4 = 18
  EXPECT_EQ(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k + 1, &alpha, da.get(), CUDA_R_32F, lda, db.get(),
                         CUDA_R_32F, k + 1, &beta, dc.get(), CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_INVALID_VALUE);  // only A leaves its 24: (5 - 1) 6 + 5 = 29 (B: (3 - 1) 5 + 5 = 15 of 16)
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // library refusals are not runtime errors
  EXPECT_EQ(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
}

// One cuBLASLt problem with its descriptors, as lt_matmul makes them.
struct LtProblem {
  cublasLtHandle_t h = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, cd = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  LtProblem(int m, int n, int k, cublasOperation_t ta, int lda) {
    EXPECT_EQ(cublasLtCreate(&h), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
    const int32_t t = ta;
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&a, CUDA_R_32F, ta == CUBLAS_OP_N ? m : k, ta == CUBLAS_OP_N ? k : m, lda),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&b, CUDA_R_32F, k, n, k), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&cd, CUDA_R_32F, m, n, m), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
  }
  ~LtProblem() {
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(cd);
    cublasLtMatrixLayoutDestroy(b);
    cublasLtMatrixLayoutDestroy(a);
    cublasLtMatmulDescDestroy(desc);
    cublasLtDestroy(h);
  }
  cublasStatus_t heuristic(cublasLtMatmulHeuristicResult_t& r) {
    int found = 0;
    const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(h, desc, a, b, cd, cd, pref, 1, &r, &found);
    EXPECT_EQ(found, s == CUBLAS_STATUS_SUCCESS ? 1 : 0);
    return s;
  }
  cublasStatus_t run(const cublasLtMatmulHeuristicResult_t& r, const void* pa, const void* pb, void* pd, void* ws,
                     size_t ws_bytes, float beta = 0.0f) {
    const float alpha = 1.0f;
    return cublasLtMatmul(h, desc, &alpha, pa, a, pb, b, &beta, pd, cd, pd, cd, &r.algo, ws, ws_bytes,
                          cudaStreamPerThread);
  }
};

TEST(EmuCublasLt, MatmulWithBiasIsTheProductPlusOneValuePerRowAndBetaZeroNeverReadsD) {
  const int m = 6, n = 4, k = 3;
  LtProblem p(m, n, k, CUBLAS_OP_T, k);  // A stored (k, m), read transposed
  const auto a = ramp(k * m, 0.25f), b = ramp(k * n, 0.5f), bias = ramp(m, 1.0f);
  DeviceArray<float> da(a), db(b), dbias(bias), dd(std::vector<float>(m * n, NAN));
  const uint32_t e = CUBLASLT_EPILOGUE_BIAS;
  const void* bp = dbias.get();
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e)), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof(bp)),
            CUBLAS_STATUS_SUCCESS);
  const uint64_t ws_limit = 1 << 20;
  ASSERT_EQ(cublasLtMatmulPreferenceSetAttribute(p.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_limit,
                                                 sizeof(ws_limit)),
            CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t r{};
  ASSERT_EQ(p.heuristic(r), CUBLAS_STATUS_SUCCESS);
  ASSERT_GT(r.workspaceSize, 0u);
  ASSERT_LE(r.workspaceSize, ws_limit);
  DeviceArray<unsigned char> ws(r.workspaceSize);
  ASSERT_EQ(p.run(r, da.get(), db.get(), dd.get(), ws.get(), r.workspaceSize), CUBLAS_STATUS_SUCCESS);
  const auto want = product(m, n, k, a, k, true, b, k, false);
  const auto got = dd.download();
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) EXPECT_NEAR(got[j * m + i], want[j * m + i] + bias[i], 1e-5) << i << "," << j;
  // The workspace below the algorithm's need, or not device memory.
  EXPECT_EQ(p.run(r, da.get(), db.get(), dd.get(), ws.get(), r.workspaceSize - 1), CUBLAS_STATUS_INVALID_VALUE);
  std::vector<unsigned char> host_ws(r.workspaceSize);
  EXPECT_EQ(p.run(r, da.get(), db.get(), dd.get(), host_ws.data(), r.workspaceSize), CUBLAS_STATUS_INVALID_VALUE);
}

TEST(EmuCublasLt, AttributesOfTheWrongSizeAndBadLayoutsAreRefused) {
  LtProblem p(4, 4, 4, CUBLAS_OP_N, 4);
  const int64_t wide = CUBLAS_OP_T;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &wide, sizeof(wide)),
            CUBLAS_STATUS_INVALID_VALUE);  // TRANSA is an int32_t
  const int32_t narrow = 16;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &narrow, sizeof(narrow)),
            CUBLAS_STATUS_INVALID_VALUE);  // EPILOGUE_AUX_LD is an int64_t
  const uint32_t align = 16;
  EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(p.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &align,
                                                 sizeof(align)),
            CUBLAS_STATUS_INVALID_VALUE);  // MAX_WORKSPACE_BYTES is a uint64_t
  cublasLtMatrixLayout_t l = nullptr;
  EXPECT_EQ(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, 8, 2, 7), CUBLAS_STATUS_INVALID_VALUE);  // ld < rows
  const int32_t t = CUBLAS_OP_T;
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &t, sizeof(t)), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t r{};
  EXPECT_EQ(p.heuristic(r), CUBLAS_STATUS_SUCCESS);  // square: B^T fits as well as B
  LtProblem q(6, 4, 3, CUBLAS_OP_N, 6);
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(q.desc, CUBLASLT_MATMUL_DESC_TRANSB, &t, sizeof(t)), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(q.heuristic(r), CUBLAS_STATUS_INVALID_VALUE);  // B stored (3, 4) read as (4, 3): not (k, n)
}

TEST(EmuCublasLt, AnOperandLessAlignedThanItsAlgorithmOrOutsideDeviceMemoryIsRefused) {
  const int m = 4, n = 4, k = 4;
  LtProblem p(m, n, k, CUBLAS_OP_N, m);
  DeviceArray<float> da(m * k + 1), db(ramp(k * n, 1.0f)), dd(m * n);
  ASSERT_EQ(cudaMemset(da.get(), 0, (m * k + 1) * sizeof(float)), cudaSuccess);
  cublasLtMatmulHeuristicResult_t r{};
  ASSERT_EQ(p.heuristic(r), CUBLAS_STATUS_SUCCESS);  // chosen for the default 256-byte alignment
  EXPECT_EQ(p.run(r, da.get() + 1, db.get(), dd.get(), nullptr, 0), CUBLAS_STATUS_INVALID_VALUE);
  const uint32_t four = 4;
  ASSERT_EQ(cublasLtMatmulPreferenceSetAttribute(p.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &four,
                                                 sizeof(four)),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(p.heuristic(r), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(p.run(r, da.get() + 1, db.get(), dd.get(), nullptr, 0), CUBLAS_STATUS_SUCCESS);
  std::vector<float> host(m * k);
  EXPECT_EQ(p.run(r, host.data(), db.get(), dd.get(), nullptr, 0), CUBLAS_STATUS_INVALID_VALUE);  // host memory
  DeviceArray<float> small(m * k - 1);
  EXPECT_EQ(p.run(r, small.get(), db.get(), dd.get(), nullptr, 0), CUBLAS_STATUS_INVALID_VALUE);  // too short
}

TEST(EmuCublasLt, GeluAuxKeepsTheInputWhereItsLeadingDimensionSaysAndNeedsAMultipleOf8) {
  const int m = 3, n = 2, k = 2;
  LtProblem p(m, n, k, CUBLAS_OP_N, m);
  const auto a = ramp(m * k, 0.25f), b = ramp(k * n, 0.5f);
  DeviceArray<float> da(a), db(b), dd(m * n), aux(std::vector<float>(8 * n, 7.0f));
  const uint32_t e = CUBLASLT_EPILOGUE_GELU_AUX;
  void* ap = aux.get();
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e)), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &ap, sizeof(ap)),
            CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t r{};
  for (int64_t ld : {int64_t{0}, int64_t{3}, int64_t{4}}) {  // below the rows; not a multiple of 8
    ASSERT_EQ(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld)),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(p.heuristic(r), CUBLAS_STATUS_INVALID_VALUE) << ld;
  }
  const int64_t ld = 8;
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld)),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(p.heuristic(r), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(p.run(r, da.get(), db.get(), dd.get(), nullptr, 0), CUBLAS_STATUS_SUCCESS);
  const auto want = product(m, n, k, a, m, false, b, k, false);
  const auto got = dd.download(), kept = aux.download();
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < 8; ++i) {
      if (i >= m) {
        EXPECT_EQ(kept[j * 8 + i], 7.0f);  // past the rows: untouched
        continue;
      }
      const double x = want[j * m + i];
      EXPECT_NEAR(kept[j * 8 + i], x, 1e-6);
      EXPECT_NEAR(got[j * m + i], 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))), 1e-6);
    }
}

TEST(EmuCudnn, HandlesAndStatusCategories) {
  cudnnHandle_t h = nullptr;
  ASSERT_EQ(cudnnCreate(&h), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(cudnnSetStream(h, cudaStreamPerThread), CUDNN_STATUS_SUCCESS);
  EXPECT_STREQ(cudnnGetErrorString(CUDNN_STATUS_NOT_SUPPORTED_SHAPE), "CUDNN_STATUS_NOT_SUPPORTED");
  EXPECT_EQ(CUDNN_STATUS_CATEGORY(CUDNN_STATUS_NOT_SUPPORTED_LAYOUT), CUDNN_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(cudnnDestroy(h), CUDNN_STATUS_SUCCESS);
}

}  // namespace
}  // namespace dp::emu::test
