// defines: flash_forward / flash_backward, the f32 causal attention core of the oneDNN backend:
// FlashAttention's tiling (Dao et al. 2022, "FlashAttention", Alg. 1; the backward's loop order
// and its D_i = rowsum(dO_i * O_i) from FlashAttention-2, Dao 2023, Alg. 2) on the CPU.
//
// Per (n, h), one task each (so the bits depend on the ISA clone, not on the thread count):
// query tiles of kTile rows against key tiles of kTile keys, only the tiles on or below the
// diagonal; inside a diagonal tile a group of rows stops at its own last key (rounded up to 16),
// so the products cover the causal triangle plus thin slivers instead of whole tiles.
//   forward: for each query tile, the key tiles left to right with an online softmax (running
//     max m and sum l per row, the output rescaled by e^(m_old - m_new)); keeps each row's
//     log-sum-exp lse = m + log l, not the probabilities.
//   backward: for each key tile, the query tiles at or below it: P = e^(scale q k^T - lse)
//     recomputed, dP = dO V^T, dS = P (dP - D_i); dV += P^T dO, dQ += scale dS K, dK += scale dS^T Q.
//   Recomputing P costs one product of the backward's five and its exponentials; keeping it would
//   cost (N, H, T, T/2) floats written and read again (15.7 MB a layer at the GPT bench's shape):
//   docs/cpu-performance.md has the measurement that chose recomputing.
// The attention dropout drops element (n, h, i, j) by its logical index ((n H + h) T + i) T + j
// (attention_ref.h's dropout_logical), the mask of the reference and of causal_core.h.
// The products run on flash_tile.h's register-blocked kernel, compiled per ISA clone (AVX-512 with
// FMA, AVX2 with FMA, baseline; kernels/cpu/isa.h's clone_isa() picks, so ONEDNN_MAX_CPU_ISA limits it).
// Layouts as attention_ref.h: qkv (N, T, 3C), att and datt (N, T, C), C = H D.
#pragma once
#include <cstdint>
#include <vector>

#include "models/layers/attention/attention_ref.h"

namespace dp::kernels::cpu {

struct FlashTiles {
  static constexpr int64_t kTile = 64;  // query rows and keys per tile
};

// Where the forward keeps the probabilities of one (n, h): query tile b's rows, each of the keys
// [0, min(T, (b + 1) kTile)) padded to 16 floats (the tile products write whole vectors), one
// tile after another; for T = 256, 10 of the 16 64 x 64 tiles of the square.
struct FlashKept {
  explicit FlashKept(int64_t T);
  int64_t T = 0;
  std::vector<int64_t> offset;  // query tile b's first element
  std::vector<int64_t> stride;  // its row stride
  int64_t packed = 0;           // elements per (n, h)
};

// att (N, T, C) and lse (N, H, T), each query row's log-sum-exp of its scaled scores, from qkv;
// with P (N, H, FlashKept(T).packed) non-null, also the probabilities, kept for the backward
// (then lse may be null: the backward does not read it).
void flash_forward(float* att, float* lse, float* P, const float* qkv, int64_t N, int64_t T, int64_t H, int64_t D,
                   const AttnDropout& drop);
// dqkv (N, T, 3C) from datt, qkv and the forward's att, lse and (null: recomputed) P.
void flash_backward(float* dqkv, const float* datt, const float* qkv, const float* att, const float* lse,
                    const float* P, int64_t N, int64_t T, int64_t H, int64_t D, const AttnDropout& drop);

}  // namespace dp::kernels::cpu
