#include "kernels/cpu/philox_words.h"

#include <algorithm>
#include <cstring>

#include "base/philox.h"
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace dp::kernels::cpu {

namespace {

// Blocks per batch: 16, two AVX-512 registers of 64-bit lanes per Philox word.
constexpr int kBlocks = 16;
constexpr int kWords = 4 * kBlocks;

// Each 32-bit Philox word lives in a 64-bit lane whose high half is left unspecified: a round reads
// its words through 32 x 32 -> 64-bit products of the low halves (pmuludq: one instruction per 8,
// 4 or 2 lanes) and through xors, which keep the halves apart, so nothing is masked or repacked.
// GCC 12's vectoriser multiplies such lanes in full 64 bits (three products each), or splits
// 32-bit lanes into even and odd ones and shuffles them back: 1.3-1.5 ns a word on AVX-512 either
// way, against 0.58 here (AVX2 0.86, baseline 1.34; Philox::block per word 13.8; Zen 4, 2026-11-29,
// docs/cpu-performance.md). Hence the one intrinsic, in its width per clone.
#if defined(__x86_64__) && defined(__GNUC__)
typedef uint64_t U8 __attribute__((vector_size(64)));
typedef uint64_t U4 __attribute__((vector_size(32)));
typedef uint64_t U2 __attribute__((vector_size(16)));
// vpmuludq by <immintrin.h>, whose functions need their ISA in every function they are inlined
// into: here only the clones, which flatten (inline everything they call, whatever the ISA of the
// templates on the way), so the helpers are marked inline, not always_inline.
__attribute__((target("avx512f"))) inline void mul_low(U8& p, const U8& a, const U8& b) {
  // maskz, all lanes: GCC 12's plain _mm512_mul_epu32 passes an undefined vector that it then
  // warns about (-Wmaybe-uninitialized, GCC bug 105593).
  p = reinterpret_cast<U8>(_mm512_maskz_mul_epu32(0xFF, reinterpret_cast<__m512i>(a), reinterpret_cast<__m512i>(b)));
}
__attribute__((target("avx2"))) inline void mul_low(U4& p, const U4& a, const U4& b) {
  p = reinterpret_cast<U4>(_mm256_mul_epu32(reinterpret_cast<__m256i>(a), reinterpret_cast<__m256i>(b)));
}
inline void mul_low(U2& p, const U2& a, const U2& b) {
  p = reinterpret_cast<U2>(_mm_mul_epu32(reinterpret_cast<__m128i>(a), reinterpret_cast<__m128i>(b)));
}
#endif

// x = from + step * (the lane indices 0, 1, 2, ...), written in place (a helper returning a vector
// would be compiled outside the clones' ISA: GCC's -Wpsabi), through an array (GCC 12 takes a
// write to one lane for a read of the others: -Wmaybe-uninitialized).
template <typename V>
[[gnu::always_inline]] inline void lanes(V& x, uint64_t from, uint64_t step) {
  uint64_t a[sizeof(V) / sizeof(uint64_t)];
#pragma GCC unroll 8
  for (size_t i = 0; i < sizeof(V) / sizeof(uint64_t); ++i) a[i] = from + step * i;
  std::memcpy(&x, a, sizeof(V));
}

// o (4 L words) = the L blocks whose words 0, 1 are the lanes of `lo` and words 2, 3 those of
// `hi`, in stream order: lo[0] hi[0] lo[1] hi[1] ... (__builtin_shufflevector: GCC 12 and clang).
template <typename V>
[[gnu::always_inline]] inline void store_interleaved(uint32_t* o, const V& lo, const V& hi) {
  constexpr int L = static_cast<int>(sizeof(V) / sizeof(uint64_t));
  V a, b;
  if constexpr (L == 8) {
    a = __builtin_shufflevector(lo, hi, 0, 8, 1, 9, 2, 10, 3, 11);
    b = __builtin_shufflevector(lo, hi, 4, 12, 5, 13, 6, 14, 7, 15);
  } else if constexpr (L == 4) {
    a = __builtin_shufflevector(lo, hi, 0, 4, 1, 5);
    b = __builtin_shufflevector(lo, hi, 2, 6, 3, 7);
  } else {
    static_assert(L == 2);
    a = __builtin_shufflevector(lo, hi, 0, 2);
    b = __builtin_shufflevector(lo, hi, 1, 3);
  }
  std::memcpy(o, &a, sizeof(V));
  std::memcpy(o + 2 * L, &b, sizeof(V));
}

// w (kWords) = the words of blocks b0 .. b0 + kBlocks - 1: base/philox.h's ten rounds on the
// lanes of V (kBlocks / lanes vectors per word), then the lanes interleaved into stream order.
template <typename V>
inline void philox_batch(uint32_t* w, uint64_t key, uint64_t b0, uint64_t stream) {
  constexpr int L = static_cast<int>(sizeof(V) / sizeof(uint64_t)), NV = kBlocks / L;
  constexpr uint64_t kLow = 0xFFFFFFFFu;
  V c0[NV], c1[NV], c2[NV], c3[NV];
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) {
    lanes(c0[v], b0 + static_cast<uint64_t>(v * L), 1);  // the counter's low 64 bits
    c1[v] = c0[v] >> 32;
    lanes(c2[v], stream, 0);
    lanes(c3[v], stream >> 32, 0);
  }
  V m0{}, m1{};
  lanes(m0, 0xD2511F53u, 0);
  lanes(m1, 0xCD9E8D57u, 0);
  uint64_t k0 = key, k1 = key >> 32;  // the low halves are the key words
  for (int r = 0; r < 10; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      V p0{}, p1{};
      mul_low(p0, c0[v], m0);
      mul_low(p1, c2[v], m1);
      c0[v] = (p1 >> 32) ^ c1[v] ^ k0;
      c2[v] = (p0 >> 32) ^ c3[v] ^ k1;
      c1[v] = p1;
      c3[v] = p0;
    }
    k0 += 0x9E3779B9u;  // base/philox.h's key schedule, in the low halves
    k1 += 0xBB67AE85u;
  }
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v)
    store_interleaved(w + 4 * L * v, (c0[v] & kLow) | (c1[v] << 32), (c2[v] & kLow) | (c3[v] << 32));
}

// Whole batches straight into out where they fit; a partial one (a start inside a batch, or the
// tail) through a local batch.
template <typename V>
inline void batch_words_body(uint32_t* out, int64_t n, uint64_t first, uint64_t key, uint64_t stream) {
  alignas(64) uint32_t w[kWords];
  uint64_t block = first / 4;
  int64_t skip = static_cast<int64_t>(first % 4);
  for (int64_t k = 0; k < n; block += kBlocks) {
    const int64_t take = std::min<int64_t>(kWords - skip, n - k);
    if (take == kWords) {
      philox_batch<V>(out + k, key, block, stream);
    } else {
      philox_batch<V>(w, key, block, stream);
      std::memcpy(out + k, w + skip, static_cast<size_t>(take) * sizeof(uint32_t));
    }
    k += take;
    skip = 0;
  }
}

// The clones (kernels/cpu/isa.h's scheme), each on the vectors of its own width; elsewhere than
// x86-64 with GCC, Philox::block itself.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f"), flatten)) void words_avx512_(uint32_t* out, int64_t n, uint64_t first,
                                                               uint64_t key, uint64_t stream) {
  batch_words_body<U8>(out, n, first, key, stream);
}
__attribute__((target("avx2"), flatten)) void words_avx2_(uint32_t* out, int64_t n, uint64_t first, uint64_t key,
                                                          uint64_t stream) {
  batch_words_body<U4>(out, n, first, key, stream);
}
__attribute__((flatten)) void words_baseline_(uint32_t* out, int64_t n, uint64_t first, uint64_t key,
                                              uint64_t stream) {
  batch_words_body<U2>(out, n, first, key, stream);
}
#else
void words_baseline_(uint32_t* out, int64_t n, uint64_t first, uint64_t key, uint64_t stream) {
  for (int64_t k = 0; k < n; ++k) {
    uint32_t b[4];
    const uint64_t w = first + static_cast<uint64_t>(k);
    Philox::block(key, w / 4, stream, b);
    out[k] = b[w % 4];
  }
}
void words_avx512_(uint32_t* out, int64_t n, uint64_t first, uint64_t key, uint64_t stream) {
  words_baseline_(out, n, first, key, stream);
}
void words_avx2_(uint32_t* out, int64_t n, uint64_t first, uint64_t key, uint64_t stream) {
  words_baseline_(out, n, first, key, stream);
}
#endif
DP_ISA_CLONE_DISPATCH_(void, words, (uint32_t * out, int64_t n, uint64_t first, uint64_t key, uint64_t stream))

}  // namespace

void philox_words(uint32_t* out, int64_t n, uint64_t first, uint64_t key, uint64_t stream) {
  words_clone(clone_isa())(out, n, first, key, stream);
}

void philox_words_on(CloneIsa isa, uint32_t* out, int64_t n, uint64_t first, uint64_t key, uint64_t stream) {
  words_clone(isa)(out, n, first, key, stream);
}

}  // namespace dp::kernels::cpu
