// defines: CausalBlocks (how the block core cuts the causal T x T probabilities into blocks of
// query rows) and causal_forward / causal_backward, the f32 attention core the oneDNN backend ran
// before flash_core.h (issue 33); kept as the comparison of the flash core's tests.
//
// Query rows are cut into blocks of kBlockRows; block b (rows [b B, min(T, (b+1) B))) needs the
// keys [0, min(T, (b+1) B)) only, so the scores and probabilities of each (n, h) are stored as
// these blocks one after another ("packed": for T = 256, 10 of the 16 64x64 tiles of the square)
// and every product runs on the blocks alone: one single-threaded BLAS call per block and (n, h)
// (kernels/cpu/blas.h gemm_in_task: OpenBLAS, whose buffers are pooled; oneDNN's sgemm allocates
// its packing buffers on every call), with strides into qkv and att, no copies. The softmax is our own (causal_core.cpp: an f32 exp
// polynomial the compiler vectorises); the probabilities above the diagonal of a block are 0.
// One (n, h) per task, each product single-threaded inside the task: the bits do not depend on the
// thread count. Numerically PyTorch's math in f32 (sums in f32, as its CPU kernels).
// Layouts as attention_ref.h; the attention dropout uses its logical indices (dropout_logical).
#pragma once
#include <cstdint>
#include <vector>

#include "models/layers/attention/attention_ref.h"

namespace dp::kernels::cpu {

struct CausalBlocks {
  static constexpr int64_t kBlockRows = 64;
  explicit CausalBlocks(int64_t T);
  int64_t T = 0, count = 0;
  std::vector<int64_t> offset;  // block b's first element within one (n, h)'s packed probabilities
  int64_t packed = 0;           // elements per (n, h)
  int64_t rows(int64_t b) const;   // query rows of block b
  int64_t first(int64_t b) const { return b * kBlockRows; }
  int64_t keys(int64_t b) const { return first(b) + rows(b); }  // the row length of block b
};

// P (N, H, packed) and att (N, T, C) from qkv. scratch: per thread kBlockRows * T floats
// (omp_get_max_threads() of them), used with attention dropout only.
void causal_forward(float* att, float* P, const float* qkv, int64_t N, int64_t H, int64_t D, const CausalBlocks& cb,
                    const AttnDropout& drop, float* scratch);
// dqkv (N, T, 3C) from datt and the forward's P (overwritten). scratch: per thread
// 2 kBlockRows * T floats.
void causal_backward(float* dqkv, const float* datt, const float* qkv, const float* P, int64_t N, int64_t H,
                     int64_t D, const CausalBlocks& cb, const AttnDropout& drop, float* scratch);

}  // namespace dp::kernels::cpu
