// lt_matmul's cuBLASLt path (models/layers/linear/lt_matmul.h): the per-key algorithm cache,
// the descriptors, and the cublasGemmEx fallback. CUDA builds only.
#include "models/layers/linear/lt_matmul.h"

#include <cublasLt.h>

#include <map>
#include <mutex>

#include "kernels/cuda/elementwise.h"
#include "models/layers/gelu/gelu_kernels.h"
#include "runtime/cuda/exec_context.h"
#include "runtime/cuda/log_library_failure.h"
#include "runtime/cuda/owner.h"
#include "runtime/cuda/check.h"
#include "runtime/log.h"

namespace dp::cuda {

namespace {

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::F16: return CUDA_R_16F;
    default: throw DpError(fmt::format("lt_matmul: dtype {} is not supported", dtype_name(t)));
  }
}

// Owners (runtime/cuda/owner.h) of the three cuBLASLt descriptors, made per call: host-side
// objects, cheap next to the matmul.
DP_CUDA_DESTROY(DestroyMatmulDesc, cublasLtMatmulDescDestroy);
DP_CUDA_DESTROY(DestroyMatrixLayout, cublasLtMatrixLayoutDestroy);
DP_CUDA_DESTROY(DestroyPreference, cublasLtMatmulPreferenceDestroy);

// f32 accumulation with f32 scalars; TF32 tensor cores for f32 data when the key says so.
cublasComputeType_t compute_type(const LtKey& key) {
  return key.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

cublasLtMatmulDesc_t new_matmul_desc(cublasComputeType_t compute) {
  cublasLtMatmulDesc_t d = nullptr;
  CHECK_CUBLAS(cublasLtMatmulDescCreate(&d, compute, CUDA_R_32F));
  return d;
}
class MatmulDesc : public Owner<cublasLtMatmulDesc_t, DestroyMatmulDesc> {
 public:
  explicit MatmulDesc(cublasComputeType_t compute) : Owner(new_matmul_desc(compute)) {}
  template <typename T>
  void set(cublasLtMatmulDescAttributes_t attr, const T& v) {
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(get(), attr, &v, sizeof(v)));
  }
};

cublasLtMatrixLayout_t new_matrix_layout(cudaDataType_t type, const LtLayout& l) {
  cublasLtMatrixLayout_t m = nullptr;
  CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&m, type, static_cast<uint64_t>(l.rows), static_cast<uint64_t>(l.cols),
                                          l.ld));
  return m;
}
class MatrixLayout : public Owner<cublasLtMatrixLayout_t, DestroyMatrixLayout> {
 public:
  MatrixLayout(cudaDataType_t type, const LtLayout& l) : Owner(new_matrix_layout(type, l)) {}
};

cublasLtMatmulPreference_t new_preference() {
  cublasLtMatmulPreference_t p = nullptr;
  CHECK_CUBLAS(cublasLtMatmulPreferenceCreate(&p));
  return p;
}
class Preference : public Owner<cublasLtMatmulPreference_t, DestroyPreference> {
 public:
  Preference() : Owner(new_preference()) {}
  template <typename T>
  void set(cublasLtMatmulPreferenceAttributes_t attr, const T& v) {
    CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(get(), attr, &v, sizeof(v)));
  }
};

// The heuristic's first algorithm, or none (lt false): then the classic cuBLAS GEMM runs it.
struct Choice {
  bool lt = false;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace_bytes = 0;
};

std::mutex& cache_mutex() {
  static std::mutex m;
  return m;
}
std::map<LtKey, Choice>& cache() {
  static std::map<LtKey, Choice> c;
  return c;
}

// The epilogue: bias, GELU with its pre-activation kept (column-major the aux matrix is (n, m)
// with leading dimension n, as D), both, or none.
void set_epilogue(MatmulDesc& desc, const LtGemm& g, cudaDataType_t type) {
  uint32_t e = CUBLASLT_EPILOGUE_DEFAULT;
  if (g.gelu_pre) {
    e = g.bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, g.gelu_pre);
    desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, static_cast<int64_t>(g.n));
  } else if (g.bias) {
    e = CUBLASLT_EPILOGUE_BIAS;
  }
  if (e == CUBLASLT_EPILOGUE_DEFAULT) return;
  desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE, e);
  if (g.bias) {
    desc.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias);
    desc.set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(type));
  }
}

// The same column-major problem through cublasGemmEx (the handle is bound to the compute stream;
// the same compute type), C copied into D first when they differ, then the bias as its own
// kernel; with a GELU the product goes to gelu_pre and the GELU kernel writes D from it.
void gemm_ex_fallback(ExecContext& ctx, const LtGemm& g, const ColumnMajorGemm& cm, const LtKey& key) {
  constexpr int64_t kIntMax = 0x7FFFFFFF;
  DP_CHECK(cm.m <= kIntMax && cm.n <= kIntMax && cm.k <= kIntMax && cm.first.ld <= kIntMax &&
               cm.second.ld <= kIntMax && cm.c.ld <= kIntMax,
           "lt_matmul: m={} n={} k={} too large for the cublasGemmEx fallback", g.m, g.n, g.k);
  const bool padded = g.ldd != 0 && g.ldd != g.n;
  DP_CHECK(!padded || (!g.bias && (g.beta == 0.0f || g.c == g.d)),
           "lt_matmul: the cublasGemmEx fallback of a padded D (ldd = {}, n = {}) takes no bias and no separate C",
           g.ldd, g.n);
  const cudaDataType_t type = cuda_type(g.dtype);
  void* out = g.gelu_pre ? g.gelu_pre : g.d;
  if (g.beta != 0.0f && g.c != out)
    CHECK_CUDA(cudaMemcpyAsync(out, g.c, static_cast<size_t>(g.m * g.n) * dtype_size(g.dtype),
                               cudaMemcpyDeviceToDevice, ctx.compute()));
  CHECK_CUBLAS(cublasGemmEx(ctx.cublas(), cm.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N,
                            cm.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(cm.m), static_cast<int>(cm.n),
                            static_cast<int>(cm.k), &g.alpha, g.b, type, static_cast<int>(cm.first.ld), g.a, type,
                            static_cast<int>(cm.second.ld), &g.beta, out, type, static_cast<int>(cm.c.ld),
                            compute_type(key), CUBLAS_GEMM_DEFAULT));
  if (g.bias) CHECK_CUDA(kernels::cuda::bias_add(g.dtype, out, g.bias, g.m, g.n, 1, ctx.compute()));
  if (g.gelu_pre)
    CHECK_CUDA(kernels::cuda::gelu_forward(g.dtype, g.d, g.gelu_pre, g.m * g.n, /*tanh_approximation=*/true,
                                           ctx.compute()));
}


// The heuristic's first algorithm for key (one query per key per process, cached), or none.
Choice choose_algorithm(ExecContext& ctx, const LtGemm& g, const LtKey& key, const MatmulDesc& desc,
                        const MatrixLayout& first, const MatrixLayout& second, const MatrixLayout& cd) {
  {
    std::lock_guard<std::mutex> lock(cache_mutex());
    auto it = cache().find(key);
    if (it != cache().end()) return it->second;
  }
  Preference pref;
  pref.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(ctx.workspace_limit()));
  // Our operands are cuBLAS's B (our A), A (our B), C and D.
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_b);
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_a);
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_c);
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_d);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  // NOT_SUPPORTED: no algorithm for this configuration, as is found == 0.
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(ctx.cublaslt(), desc.get(), first.get(), second.get(),
                                                           cd.get(), cd.get(), pref.get(), 1, &result, &found);
  if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED)
    fail_cublas(st, "cublasLtMatmulAlgoGetHeuristic(...)", __FILE__, __LINE__);
  Choice choice{};
  if (st == CUBLAS_STATUS_SUCCESS && found >= 1 && result.state == CUBLAS_STATUS_SUCCESS) {
    choice = {true, result.algo, result.workspaceSize};
  } else {
    log::get("cuda")->warn("cuBLASLt has no algorithm for {} m={} n={} k={} trans_a={} trans_b={} bias={} gelu={} "
                           "(alignments {}/{}/{}) within {} bytes of workspace; using cublasGemmEx",
                           dtype_name(g.dtype), g.m, g.n, g.k, g.trans_a, g.trans_b, g.bias != nullptr,
                           g.gelu_pre != nullptr, key.align_a, key.align_b, key.align_d, ctx.workspace_limit());
  }
  size_t cached = 0;
  {
    std::lock_guard<std::mutex> lock(cache_mutex());
    cache().emplace(key, choice);
    cached = cache().size();
  }
  if (choice.lt)
    log::get("cuda")->debug("cuBLASLt algorithm for {} m={} n={} k={} trans_a={} trans_b={} bias={} gelu={} "
                            "(alignments {}/{}/{}): {} bytes of workspace; {} problems chosen in this process",
                            dtype_name(g.dtype), g.m, g.n, g.k, g.trans_a, g.trans_b, g.bias != nullptr,
                            g.gelu_pre != nullptr, key.align_a, key.align_b, key.align_d, choice.workspace_bytes,
                            cached);
  return choice;
}

}  // namespace

void lt_matmul(ExecContext& ctx, const LtGemm& g) {
  check_lt_gemm(g);
  const ColumnMajorGemm cm = column_major_gemm(g.m, g.n, g.k, g.trans_a, g.trans_b, g.lda, g.ldd);
  const cudaDataType_t type = cuda_type(g.dtype);
  const LtKey key = lt_key(ctx.device(), ctx.workspace_limit(), g, ctx.tf32());
  if (g.gelu_pre && !lt_gelu_epilogue_allowed(g.n)) return gemm_ex_fallback(ctx, g, cm, key);

  MatmulDesc desc(compute_type(key));
  desc.set(CUBLASLT_MATMUL_DESC_TRANSA, static_cast<int32_t>(cm.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N));
  desc.set(CUBLASLT_MATMUL_DESC_TRANSB, static_cast<int32_t>(cm.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N));
  set_epilogue(desc, g, type);
  const MatrixLayout first(type, cm.first), second(type, cm.second), cd(type, cm.c);
  const Choice choice = choose_algorithm(ctx, g, key, desc, first, second, cd);
  if (!choice.lt) return gemm_ex_fallback(ctx, g, cm, key);
  const void* c = g.beta != 0.0f ? g.c : g.d;  // not read when beta == 0
  void* workspace = ctx.workspace(choice.workspace_bytes);
  CHECK_CUBLAS(cublasLtMatmul(ctx.cublaslt(), desc.get(), &g.alpha, g.b, first.get(), g.a, second.get(), &g.beta, c,
                              cd.get(), g.d, cd.get(), &choice.algo, workspace, choice.workspace_bytes, ctx.compute()));
}

}  // namespace dp::cuda
