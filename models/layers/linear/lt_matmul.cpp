#include "models/layers/linear/lt_matmul.h"

#include <cstdint>

#include "base/alignment.h"
#include "base/error.h"

namespace dp::cuda {

namespace {
// A row-major (rows, cols) matrix with rows ld apart (0: contiguous, ld = cols) read column-major:
// (cols, rows), the same ld.
LtLayout column_major_of_row_major(int64_t rows, int64_t cols, int64_t ld = 0) {
  return {cols, rows, ld > 0 ? ld : cols};
}
}  // namespace

ColumnMajorGemm column_major_gemm(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, int64_t lda,
                                  int64_t ldd) {
  ColumnMajorGemm g;
  g.m = n;
  g.n = m;
  g.k = k;
  g.trans_first = trans_b;
  g.trans_second = trans_a;
  g.first = trans_b ? column_major_of_row_major(n, k) : column_major_of_row_major(k, n);
  g.second = trans_a ? column_major_of_row_major(k, m, lda) : column_major_of_row_major(m, k, lda);
  g.c = column_major_of_row_major(m, n, ldd);
  return g;
}

uint32_t pointer_alignment(const void* p) { return static_cast<uint32_t>(address_alignment(p, 256)); }

bool lt_uses_tf32(DType dtype, Tf32 tf32) { return dtype == DType::F32 && tf32_in_matmuls(tf32); }

LtKey lt_key(int device, uint64_t workspace_limit, const LtGemm& g, Tf32 tf32) {
  LtKey key;
  key.device = device;
  key.workspace_limit = workspace_limit;
  key.dtype = g.dtype;
  key.m = g.m;
  key.n = g.n;
  key.k = g.k;
  key.trans_a = g.trans_a;
  key.trans_b = g.trans_b;
  key.lda = g.lda;
  key.ldd = g.ldd;
  key.bias = g.bias != nullptr;
  key.gelu = g.gelu_pre != nullptr;
  key.align_a = pointer_alignment(g.a);
  key.align_b = pointer_alignment(g.b);
  key.align_c = pointer_alignment(g.beta != 0.0f ? g.c : g.d);
  key.align_d = pointer_alignment(g.d);
  key.align_bias = g.bias ? pointer_alignment(g.bias) : 0;
  key.align_gelu_pre = g.gelu_pre ? pointer_alignment(g.gelu_pre) : 0;
  key.tf32 = lt_uses_tf32(g.dtype, tf32);
  return key;
}

void check_lt_gemm(const LtGemm& g) {
  DP_CHECK(g.dtype == DType::F32 || g.dtype == DType::BF16 || g.dtype == DType::F16,
           "lt_matmul: dtype {} is not supported (f32, bf16, f16)", dtype_name(g.dtype));
  DP_CHECK(g.m >= 1 && g.n >= 1 && g.k >= 1, "lt_matmul: m = {}, n = {}, k = {}: every dimension must be >= 1", g.m,
           g.n, g.k);
  DP_CHECK(g.a && g.b && g.d, "lt_matmul: null operand (a {}, b {}, d {})", g.a != nullptr, g.b != nullptr,
           g.d != nullptr);
  DP_CHECK(g.beta == 0.0f || g.c, "lt_matmul: beta = {} needs C", g.beta);
  DP_CHECK(!g.gelu_pre || g.beta == 0.0f, "lt_matmul: a GELU epilogue with beta = {}: the GELU applies to a fresh "
           "product (beta 0)", g.beta);
  const int64_t a_cols = g.trans_a ? g.m : g.k;
  DP_CHECK((g.lda == 0 || g.lda >= a_cols) && (g.ldd == 0 || g.ldd >= g.n),
           "lt_matmul: row strides lda = {} (A's rows hold {}), ldd = {} (D's rows hold {}): 0 or at least the rows",
           g.lda, a_cols, g.ldd, g.n);
  DP_CHECK(!g.gelu_pre || g.ldd == 0 || g.ldd == g.n, "lt_matmul: a GELU epilogue on a padded D (ldd = {}, n = {})",
           g.ldd, g.n);
}

bool lt_gelu_epilogue_allowed(int64_t n) { return n % 8 == 0; }

}  // namespace dp::cuda
