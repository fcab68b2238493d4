// defines: lt_matmul, one row-major GEMM through cuBLASLt, D = alpha op(A) op(B) + beta C with
// an optional bias epilogue and an optional GELU (tanh) after it, on the compute stream; LtGemm (its description), LtKey (what the
// algorithm choice depends on) and column_major_gemm (the row-major -> column-major mapping),
// the pure parts (lt_matmul.cpp), compiled in every build and tested on the host.
//
// Row-major to column-major. cuBLAS is column-major: a row-major matrix X (r, c) with leading
// dimension c is, read column-major, X^T (c, r) with the same leading dimension c. Our
// row-major D (m, n) = op(A) (m, k) op(B) (k, n) is therefore, column-major,
//   D^T (n, m) = op(B)^T (n, k) op(A)^T (k, m),
// a column-major GEMM with the operands swapped (cuBLAS's A is our B, its B our A), m and n
// swapped, k unchanged and each transpose flag unchanged: if op(B) = B, cuBLAS reads B's memory
// as B^T (n, k) and takes it as it is; if op(B) = B^T, B is stored (n, k) and read as B^T (k, n),
// and cuBLAS transposes it back to (n, k). Each operand's column-major layout is (rows = its
// stored row-major columns, cols = its stored rows, ld = rows). The bias epilogue adds a vector
// of length "rows of D" (column-major), i.e. n: one value per row-major column, broadcast over
// the m rows -- a linear layer's bias per output feature.
#pragma once
#include <compare>
#include <cstddef>
#include <cstdint>

#include "base/dtype.h"
#include "runtime/precision.h"

namespace dp::cuda {

// One row-major GEMM: D (m, n) = alpha op(A) (m, k) op(B) (k, n) + beta C (m, n) [+ bias (n)].
// A is stored (m, k), or (k, m) when trans_a; B (k, n), or (n, k) when trans_b; C and D (m, n);
// contiguous unless lda / ldd say otherwise (a padded linear output, models/layers/linear/linear.h
// pad_out_to: D's rows, and the A of the backward products that read its gradient). C may equal D (accumulation: beta 1). dtype is A's, B's, C's, D's and the
// bias's (F32, BF16 or F16); the products are summed in f32 (CUBLAS_COMPUTE_32F, no TF32, unless
// the context's train.tf32 is "all" and the data f32: CUBLAS_COMPUTE_32F_FAST_TF32) and
// alpha/beta are f32.
struct LtGemm {
  DType dtype = DType::F32;
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  const void* a = nullptr;
  const void* b = nullptr;
  const void* c = nullptr;
  void* d = nullptr;
  const void* bias = nullptr;  // (n) or null: no epilogue
  float alpha = 1.0f, beta = 0.0f;
  // Row strides, in elements: A's (0: its stored columns, k or m) and C's and D's (0: n). A padded
  // D (ldd > n) takes no GELU, and on the cublasGemmEx fallback no bias.
  int64_t lda = 0, ldd = 0;
  // Non-null: D = gelu_tanh(op(A) op(B) [+ bias]) and gelu_pre (m, n, contiguous, dtype) receives
  // what the GELU took, op(A) op(B) [+ bias], for the backward (cuBLASLt's GELU_AUX[_BIAS]
  // epilogue; a linear layer with a GELU folded into it: runtime/epilogue.h). beta must be 0.
  void* gelu_pre = nullptr;
};

// A matrix as cuBLASLt is told about it: column-major rows x cols, leading dimension ld.
struct LtLayout {
  int64_t rows = 0, cols = 0, ld = 0;
  bool operator==(const LtLayout&) const = default;
};

// The column-major problem equal to a row-major LtGemm (see the comment at the top): cuBLAS's
// first operand is our B, its second our A.
struct ColumnMajorGemm {
  int64_t m = 0, n = 0, k = 0;  // column-major: D (m, n) = op(first) (m, k) op(second) (k, n)
  bool trans_first = false, trans_second = false;
  LtLayout first, second, c;  // c: C and D
  bool operator==(const ColumnMajorGemm&) const = default;
};
// lda, ldd: LtGemm's (0: contiguous).
ColumnMajorGemm column_major_gemm(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, int64_t lda = 0,
                                  int64_t ldd = 0);

// The largest power of two (<= 256, cuBLASLt's default alignment preference) dividing the
// address; 256 for null (base/alignment.h). Algorithms are chosen for the operands' alignment.
uint32_t pointer_alignment(const void* p);

// What the choice of algorithm depends on: the device, the workspace bound, the problem, the
// operands' alignments and the compute type. One heuristic query per key per process.
struct LtKey {
  int device = 0;
  uint64_t workspace_limit = 0;
  DType dtype = DType::F32;
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  int64_t lda = 0, ldd = 0;  // LtGemm's row strides (0: contiguous)
  bool bias = false;
  bool gelu = false;  // the GELU_AUX epilogue (LtGemm::gelu_pre)
  uint32_t align_a = 0, align_b = 0, align_c = 0, align_d = 0, align_bias = 0, align_gelu_pre = 0;
  bool tf32 = false;  // compute type CUBLAS_COMPUTE_32F_FAST_TF32 (else CUBLAS_COMPUTE_32F)
  auto operator<=>(const LtKey&) const = default;
};
// tf32: the context's train.tf32; the key's tf32 is lt_uses_tf32(g.dtype, tf32).
LtKey lt_key(int device, uint64_t workspace_limit, const LtGemm& g, Tf32 tf32 = Tf32::Off);

// Whether a matmul of `dtype` data runs on TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32):
// f32 data with TF32 allowed in matmuls (train.tf32 = "all", PyTorch's
// torch.backends.cuda.matmul.allow_tf32); 16-bit data uses tensor cores anyway.
bool lt_uses_tf32(DType dtype, Tf32 tf32);

// A DpError unless g is well-formed: dims >= 1, a supported dtype, non-null operands (C only
// when beta != 0), beta 0 with a GELU, row strides 0 or at least the rows' lengths, no GELU on a
// padded D.
void check_lt_gemm(const LtGemm& g);

// Whether cuBLASLt may be asked for the GELU_AUX epilogue of a GEMM with n output columns: its
// auxiliary matrix's leading dimension (n, column-major) must be a multiple of 8. Otherwise
// lt_matmul runs the GELU as the fallback below does.
bool lt_gelu_epilogue_allowed(int64_t n);

// The cuBLASLt path (lt_matmul_cuda.cpp, CUDA builds only).
class ExecContext;

// Enqueues g on ctx.compute(): the algorithm is the heuristic's first choice for
// lt_key(g, ctx.tf32())
// within ctx.workspace_limit() bytes of workspace, asked once per key (a process-wide cache
// under a mutex; each choice logged once at debug level, subsystem "cuda", with the number of
// keys cached so far), and its workspace comes from ctx.workspace(). When cuBLASLt offers no
// algorithm (an odd alignment, say), the key remembers that, one warning is logged and the same
// problem runs through cublasGemmEx (the same compute type) on ctx.cublas() with the bias added by
// kernels/cuda/elementwise.h's bias_add (and a GELU: the GEMM into gelu_pre, then the own GELU
// kernel, models/layers/gelu/gelu_kernels.h, into D; also when lt_gelu_epilogue_allowed(n) is
// false). Throws (CHECK_CUBLAS / CHECK_CUDA) on failure.
void lt_matmul(ExecContext& ctx, const LtGemm& g);

}  // namespace dp::cuda
