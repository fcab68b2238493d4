// The emulated cuBLASLt (kernels/cuda/emu/include/cublasLt.h). The descriptors hold what the
// documentation says each attribute is (a value of the wrong size is refused); the heuristic
// checks the problem and returns one algorithm that remembers what it was chosen for (the
// preferences' minimum alignments, the bias and GELU-input pointers' alignments, its workspace
// need: min(the preference's maximum, 64 KiB)); cublasLtMatmul checks the problem again, the
// algorithm against the call (alignment, workspace), that every operand lies in device memory,
// fills the workspace with 0xFF (an undersized one is an ASan report), then runs the product
// (gemm.h) and the epilogue on the host: D = epilogue(alpha op(A) op(B) + beta C), the bias one
// value per row of D, GELU the tanh form, GELU_AUX's input stored at aux[i + j aux_ld].
#include <cublasLt.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/alignment.h"
#include "kernels/cuda/emu/libs/elements.h"
#include "kernels/cuda/emu/libs/gemm.h"
#include "kernels/cuda/emu/libs/handles.h"
#include "kernels/cuda/emu/memory.h"

struct cublasLtContext {
  int unused = 0;
};
struct cublasLtMatmulDescOpaque_t {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale = CUDA_R_32F;
  int32_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  void* aux = nullptr;
  int64_t aux_ld = 0;
  int32_t bias_type = -1, aux_type = -1;  // -1: D's type
};
struct cublasLtMatrixLayoutOpaque_t {
  cudaDataType_t type = CUDA_R_32F;
  int64_t rows = 0, cols = 0, ld = 0;
};
struct cublasLtMatmulPreferenceOpaque_t {
  uint64_t max_workspace = 0;
  uint32_t align[4] = {256, 256, 256, 256};  // A, B, C, D
};

namespace dp::emu::libs {
namespace {

using Desc = cublasLtMatmulDescOpaque_t;
using Layout = cublasLtMatrixLayoutOpaque_t;

constexpr uint64_t kAlgoMagic = 0x6f676c61756d6564ull;  // "demualgo"
constexpr uint64_t kAlgoWorkspace = uint64_t{64} << 10;

// An operand's alignment as cuBLASLt sees it: base/alignment.h with cuBLASLt's cap, 256 bytes.
uint64_t alignment_of(const void* p) { return static_cast<uint64_t>(address_alignment(p, 256)); }

bool has(uint32_t epilogue, uint32_t part) { return (epilogue & part) == part; }
bool known_epilogue(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_DEFAULT || e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU ||
         e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
constexpr uint32_t kAux = 128;  // the _AUX epilogues' flag

// Copies an attribute's value after checking its size against the documented type's.
template <typename T>
cublasStatus_t set_value(T& field, const void* buf, size_t size, const char* call, const char* name) {
  if (buf == nullptr || size != sizeof(T))
    return library_refusal(CUBLAS_STATUS_INVALID_VALUE, call,
                           fmt::format("{} is {} bytes, {} given", name, sizeof(T), buf == nullptr ? 0 : size));
  std::memcpy(&field, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

std::string epilogue_problem(const Desc& d, const Layout& D) {
  if (!known_epilogue(d.epilogue)) return fmt::format("epilogue {} is not emulated", d.epilogue);
  if (has(d.epilogue, CUBLASLT_EPILOGUE_BIAS)) {
    if (d.bias == nullptr) return "a bias epilogue without CUBLASLT_MATMUL_DESC_BIAS_POINTER";
    if (d.bias_type != -1 && d.bias_type != D.type)
      return fmt::format("bias type {}: the bias must have D's type {}", d.bias_type, static_cast<int>(D.type));
  }
  if (has(d.epilogue, CUBLASLT_EPILOGUE_GELU | kAux)) {
    if (d.aux == nullptr) return "a GELU_AUX epilogue without CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER";
    if (d.aux_ld < D.rows || d.aux_ld % 8 != 0)
      return fmt::format("EPILOGUE_AUX_LD {} must be a multiple of 8 and at least D's {} rows", d.aux_ld, D.rows);
    if (d.aux_type != -1 && d.aux_type != D.type)
      return fmt::format("aux type {}: the GELU input must have D's type {}", d.aux_type, static_cast<int>(D.type));
  }
  return "";
}

// Why the problem breaks cuBLASLt's documented rules ("" when it does not).
std::string matmul_problem(const Desc& d, const Layout& A, const Layout& B, const Layout& C, const Layout& D) {
  if (d.scale != CUDA_R_32F) return "scale type: only f32 is emulated";
  if ((d.transa != CUBLAS_OP_N && d.transa != CUBLAS_OP_T) || (d.transb != CUBLAS_OP_N && d.transb != CUBLAS_OP_T))
    return fmt::format("TRANSA {} / TRANSB {}: only N and T are emulated", d.transa, d.transb);
  if (A.type != B.type || A.type != C.type || A.type != D.type || element_bytes(A.type) == 0)
    return "A, B, C and D must have one type of f32, bf16, f16";
  if (d.compute != CUBLAS_COMPUTE_32F && !(d.compute == CUBLAS_COMPUTE_32F_FAST_TF32 && A.type == CUDA_R_32F))
    return fmt::format("compute type {} with data type {}", static_cast<int>(d.compute), static_cast<int>(A.type));
  const int64_t m = D.rows, n = D.cols;
  const bool ta = d.transa == CUBLAS_OP_T, tb = d.transb == CUBLAS_OP_T;
  const int64_t k = ta ? A.rows : A.cols;
  if ((ta ? A.cols : A.rows) != m || (tb ? B.cols : B.rows) != k || (tb ? B.rows : B.cols) != n)
    return fmt::format("op(A) {}x{} (TRANSA {}) times op(B) (B {}x{}, TRANSB {}) does not give D's {}x{}", m, k,
                       d.transa, B.rows, B.cols, d.transb, m, n);
  if (C.rows != m || C.cols != n) return fmt::format("C is {}x{}, D {}x{}", C.rows, C.cols, m, n);
  return epilogue_problem(d, D);
}

float gelu_tanh(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
}

}  // namespace
}  // namespace dp::emu::libs

using dp::emu::libs::library_refusal;
namespace L = dp::emu::libs;

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  return L::make_object(handle, CUBLAS_STATUS_SUCCESS, CUBLAS_STATUS_INVALID_VALUE, "cublasLtCreate");
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  return L::destroy_object(handle, CUBLAS_STATUS_SUCCESS, CUBLAS_STATUS_NOT_INITIALIZED, "cublasLtDestroy");
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType) {
  const cublasStatus_t s =
      L::make_object(desc, CUBLAS_STATUS_SUCCESS, CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulDescCreate");
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  (*desc)->compute = computeType;
  (*desc)->scale = scaleType;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t size) {
  constexpr const char* kCall = "cublasLtMatmulDescSetAttribute";
  if (desc == nullptr) return library_refusal(CUBLAS_STATUS_INVALID_VALUE, kCall, "null descriptor");
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: return L::set_value(desc->transa, buf, size, kCall, "TRANSA (int32_t)");
    case CUBLASLT_MATMUL_DESC_TRANSB: return L::set_value(desc->transb, buf, size, kCall, "TRANSB (int32_t)");
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return L::set_value(desc->epilogue, buf, size, kCall, "EPILOGUE (uint32_t)");
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return L::set_value(desc->bias, buf, size, kCall, "BIAS_POINTER");
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
      return L::set_value(desc->aux, buf, size, kCall, "EPILOGUE_AUX_POINTER");
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
      return L::set_value(desc->aux_ld, buf, size, kCall, "EPILOGUE_AUX_LD (int64_t)");
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
      return L::set_value(desc->bias_type, buf, size, kCall, "BIAS_DATA_TYPE (int32_t)");
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE:
      return L::set_value(desc->aux_type, buf, size, kCall, "EPILOGUE_AUX_DATA_TYPE (int32_t)");
    default:
      return library_refusal(CUBLAS_STATUS_INVALID_VALUE, kCall,
                             fmt::format("attribute {} is not emulated", static_cast<int>(attr)));
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType_t type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  constexpr const char* kCall = "cublasLtMatrixLayoutCreate";
  if (layout == nullptr) return library_refusal(CUBLAS_STATUS_INVALID_VALUE, kCall, "null pointer");
  if (L::element_bytes(type) == 0 || rows == 0 || cols == 0 || ld < static_cast<int64_t>(rows))
    return library_refusal(CUBLAS_STATUS_INVALID_VALUE, kCall,
                           fmt::format("type {} rows {} cols {} ld {} (ld must be at least rows)",
                                       static_cast<int>(type), rows, cols, ld));
  *layout = new cublasLtMatrixLayoutOpaque_t{type, static_cast<int64_t>(rows), static_cast<int64_t>(cols), ld};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  return L::make_object(pref, CUBLAS_STATUS_SUCCESS, CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulPreferenceCreate");
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t size) {
  constexpr const char* kCall = "cublasLtMatmulPreferenceSetAttribute";
  if (pref == nullptr) return library_refusal(CUBLAS_STATUS_INVALID_VALUE, kCall, "null preference");
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
      return L::set_value(pref->max_workspace, buf, size, kCall, "MAX_WORKSPACE_BYTES (uint64_t)");
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
      return L::set_value(pref->align[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES], buf, size, kCall,
                          "MIN_ALIGNMENT_*_BYTES (uint32_t)");
    default:
      return library_refusal(CUBLAS_STATUS_INVALID_VALUE, kCall,
                             fmt::format("attribute {} is not emulated", static_cast<int>(attr)));
  }
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t pref, int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int* returnAlgoCount) {
  constexpr const char* kCall = "cublasLtMatmulAlgoGetHeuristic";
  if (handle == nullptr || desc == nullptr || Adesc == nullptr || Bdesc == nullptr || Cdesc == nullptr ||
      Ddesc == nullptr || pref == nullptr || heuristicResultsArray == nullptr || returnAlgoCount == nullptr ||
      requestedAlgoCount < 1)
    return library_refusal(CUBLAS_STATUS_INVALID_VALUE, kCall, "a null argument or requestedAlgoCount < 1");
  if (const std::string why = L::matmul_problem(*desc, *Adesc, *Bdesc, *Cdesc, *Ddesc); !why.empty())
    return library_refusal(CUBLAS_STATUS_INVALID_VALUE, kCall, why);
  cublasLtMatmulHeuristicResult_t r{};
  r.algo.data[0] = L::kAlgoMagic;
  for (int i = 0; i < 4; ++i) r.algo.data[1 + i] = pref->align[i];
  r.algo.data[5] = L::alignment_of(desc->bias);  // the documented use of the pointers' values here
  r.algo.data[6] = L::alignment_of(desc->aux);
  r.algo.data[7] = std::min(pref->max_workspace, L::kAlgoWorkspace);
  r.workspaceSize = static_cast<size_t>(r.algo.data[7]);
  r.state = CUBLAS_STATUS_SUCCESS;
  r.wavesCount = 1.0f;
  heuristicResultsArray[0] = r;
  *returnAlgoCount = 1;
  return CUBLAS_STATUS_SUCCESS;
}

namespace dp::emu::libs {
namespace {

// Why the call does not fit the algorithm it names ("" when it does); a null algorithm is the
// library's own choice and fits any call.
std::string algo_problem(const cublasLtMatmulAlgo_t* algo, const Desc& d, const void* A, const void* B, const void* C,
                         const void* D, const void* workspace, size_t workspace_bytes) {
  if (algo == nullptr) return "";
  if (algo->data[0] != kAlgoMagic) return "the algorithm was not returned by cublasLtMatmulAlgoGetHeuristic";
  const void* operands[4] = {A, B, C, D};
  for (int i = 0; i < 4; ++i)
    if (alignment_of(operands[i]) < algo->data[1 + i])
      return fmt::format("operand {} is aligned to {} bytes; the algorithm was chosen for {}", "ABCD"[i],
                         alignment_of(operands[i]), algo->data[1 + i]);
  if (alignment_of(d.bias) < algo->data[5] || alignment_of(d.aux) < algo->data[6])
    return "the bias or GELU-input pointer is less aligned than when the algorithm was chosen";
  if (workspace_bytes < algo->data[7] || (algo->data[7] > 0 && workspace == nullptr))
    return fmt::format("the algorithm needs {} bytes of workspace; {} given", algo->data[7], workspace_bytes);
  return "";
}

// Why an operand of the call is not where the layouts say ("" when all are in device memory).
std::string memory_problem(const Desc& d, const void* A, const Layout& Al, const void* B, const Layout& Bl,
                           const void* C, const Layout& Cl, bool reads_c, const void* D, const Layout& Dl,
                           const void* workspace, size_t workspace_bytes) {
  auto inside = [](const void* p, const Layout& l) {
    return in_device_memory(p, l.type, matrix_span(l.rows, l.cols, l.ld));
  };
  if (!inside(A, Al) || !inside(B, Bl) || (reads_c && !inside(C, Cl)) || !inside(D, Dl))
    return "an operand leaves its device allocation (or is not device memory)";
  if (has(d.epilogue, CUBLASLT_EPILOGUE_BIAS) && !in_device_memory(d.bias, Dl.type, Dl.rows))
    return fmt::format("the bias ({} values) is not in device memory", Dl.rows);
  if (has(d.epilogue, CUBLASLT_EPILOGUE_GELU | kAux) &&
      !in_device_memory(d.aux, Dl.type, matrix_span(Dl.rows, Dl.cols, d.aux_ld)))
    return "the GELU input matrix leaves its device allocation";
  if (workspace_bytes > 0 && !is_device_range(workspace, workspace_bytes))
    return fmt::format("the workspace of {} bytes is not in device memory", workspace_bytes);
  return "";
}

// D = epilogue(alpha acc + beta C), element by element, C read only when beta != 0.
void finish(const Desc& d, const std::vector<float>& acc, float alpha, float beta, const void* C, const Layout& Cl,
            void* D, const Layout& Dl) {
  for (int64_t j = 0; j < Dl.cols; ++j)
    for (int64_t i = 0; i < Dl.rows; ++i) {
      float v = alpha * acc[static_cast<size_t>(j * Dl.rows + i)];
      if (beta != 0.0f) v += beta * load(C, Cl.type, j * Cl.ld + i);
      if (has(d.epilogue, CUBLASLT_EPILOGUE_BIAS)) v += load(d.bias, Dl.type, i);
      if (has(d.epilogue, CUBLASLT_EPILOGUE_GELU)) {
        if (has(d.epilogue, CUBLASLT_EPILOGUE_GELU | kAux)) store(d.aux, Dl.type, j * d.aux_ld + i, v);
        v = gelu_tanh(v);
      }
      store(D, Dl.type, j * Dl.ld + i, v);
    }
}

}  // namespace
}  // namespace dp::emu::libs

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc,
                              const void* beta, const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspaceSizeInBytes, cudaStream_t stream) {
  constexpr const char* kCall = "cublasLtMatmul";
  if (handle == nullptr || desc == nullptr || Adesc == nullptr || Bdesc == nullptr || Cdesc == nullptr ||
      Ddesc == nullptr || alpha == nullptr || beta == nullptr)
    return library_refusal(CUBLAS_STATUS_INVALID_VALUE, kCall, "a null handle, descriptor or scalar");
  if (!L::known_stream(stream, kCall)) return CUBLAS_STATUS_INVALID_VALUE;
  const float a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
  for (const std::string& why :
       {L::matmul_problem(*desc, *Adesc, *Bdesc, *Cdesc, *Ddesc),
        L::algo_problem(algo, *desc, A, B, C, D, workspace, workspaceSizeInBytes),
        L::memory_problem(*desc, A, *Adesc, B, *Bdesc, C, *Cdesc, b != 0.0f, D, *Ddesc, workspace,
                          workspaceSizeInBytes)})
    if (!why.empty()) return library_refusal(CUBLAS_STATUS_INVALID_VALUE, kCall, why);
  if (workspaceSizeInBytes > 0) std::memset(workspace, 0xFF, workspaceSizeInBytes);  // the algorithm's scratch
  const bool ta = desc->transa == CUBLAS_OP_T, tb = desc->transb == CUBLAS_OP_T;
  const int64_t k = ta ? Adesc->rows : Adesc->cols;
  const std::vector<float> acc =
      L::column_major_product(Ddesc->rows, Ddesc->cols, k, L::Operand{A, Adesc->type, Adesc->ld, ta},
                              L::Operand{B, Bdesc->type, Bdesc->ld, tb}, desc->compute == CUBLAS_COMPUTE_32F_FAST_TF32);
  L::finish(*desc, acc, a, b, C, *Cdesc, D, *Ddesc);
  return CUBLAS_STATUS_SUCCESS;
}
