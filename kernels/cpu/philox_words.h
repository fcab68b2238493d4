// defines: philox_words, a run of consecutive 32-bit words of one Philox stream, many blocks per
// call: the CPU's fast way to draw what base/philox.h's Philox::block draws one block at a time
// (the dropout masks of models/layers/dropout/ and the attention's, issue 33).
//
// Word w of stream (key, stream) is word w % 4 of Philox::block(key, w / 4, stream), i.e. the
// w-th next_u32() of Rng(key, stream) (base/rng.h). The blocks are computed kBlocks at a time as
// structure-of-arrays lanes (each round's two 32 x 32 -> 64-bit products are one vector multiply
// per 8 or 4 lanes: vpmuludq), in AVX-512, AVX2 and baseline clones picked per process
// (kernels/cpu/isa.h: ONEDNN_MAX_CPU_ISA limits it). Integer arithmetic only: every clone gives
// Philox::block's bits.
#pragma once
#include <cstdint>

#include "kernels/cpu/isa.h"

namespace dp::kernels::cpu {

// out[k] (n) = word first + k of stream (key, stream), for any first and n >= 0.
void philox_words(uint32_t* out, int64_t n, uint64_t first, uint64_t key, uint64_t stream);

// The same on a given clone (one the CPU has: see cpu_clone_isa()), how a test runs each of them.
void philox_words_on(CloneIsa isa, uint32_t* out, int64_t n, uint64_t first, uint64_t key, uint64_t stream);

}  // namespace dp::kernels::cpu
