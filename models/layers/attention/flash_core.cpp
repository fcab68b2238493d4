#include "models/layers/attention/flash_core.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/philox_words.h"
#include "kernels/cpu/exp_nonpositive.h"
#include "models/layers/attention/flash_tile.h"
#include "models/layers/dropout/dropout_ref.h"

namespace dp::kernels::cpu {

namespace {

constexpr int64_t kTile = FlashTiles::kTile;

int64_t pad16(int64_t x) { return (x + 15) / 16 * 16; }

// This thread's `n` floats, 64-byte aligned (grown once, then reused: a step allocates nothing).
float* thread_floats(int64_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < static_cast<size_t>(n + 16)) buf.resize(static_cast<size_t>(n + 16));
  const auto addr = reinterpret_cast<uintptr_t>(buf.data());
  return buf.data() + ((64 - addr % 64) % 64) / sizeof(float);
}

// One (n, h): T, D and their paddings to 16, the strides of qkv (ld = 3C) and att (ldo = C), the
// softmax scale, the rows a product kernel takes at once (4 rows of 4 zmm accumulators on AVX-512;
// 3 rows of 4 on AVX2 and the baseline, which have 16 registers).
// kept: the layout of the kept probabilities, null where the backward recomputes them.
struct Head {
  int64_t T, D, Tp, Dp, ld, ldo;
  float scale;
  int rmax;
  const FlashKept* kept;
};

// dst (T, Dp) = the rows of src (T, D, stride ld), zero-padded.
void pack_rows(float* dst, const float* src, int64_t ld, const Head& h) {
  for (int64_t t = 0; t < h.T; ++t) {
    std::copy(src + t * ld, src + t * ld + h.D, dst + t * h.Dp);
    std::fill(dst + t * h.Dp + h.D, dst + (t + 1) * h.Dp, 0.0f);
  }
}

// dst (D, Tp) = src (T, D, stride ld) transposed, zero-padded: the B operand of q k^T and dO v^T.
// In blocks of 16 rows of src: each of dst's rows takes 16 contiguous floats from them, so the
// block's 16 source rows and the 64-byte pieces of dst being written stay in L1 (row by row, the
// stores went to D lines of a (D, Tp) block larger than L1: 30% of the forward core's time).
void pack_transposed(float* dst, const float* src, const Head& h) {
  constexpr int64_t kRows = 16;
  for (int64_t t0 = 0; t0 < h.T; t0 += kRows) {
    const int64_t n = std::min(kRows, h.T - t0);
    const float* from = src + t0 * h.ld;
    for (int64_t d = 0; d < h.D; ++d) {
      float* to = dst + d * h.Tp + t0;
      for (int64_t j = 0; j < n; ++j) to[j] = from[j * h.ld + d];
    }
  }
  for (int64_t d = 0; d < h.D; ++d) std::fill(dst + d * h.Tp + h.T, dst + (d + 1) * h.Tp, 0.0f);
}

// s (rq, rk; stride lds) = a (rq, D; stride lda) bt (D, Tp)[:, k0 + j], unscaled, for the keys a
// row needs: on the diagonal tile a group of rows stops at its last row's key, rounded up to 16.
template <typename Vec>
[[gnu::always_inline]] inline void tile_scores(float* s, int64_t lds, const float* a, int64_t lda, const float* bt,
                                               const Head& h, int64_t rq, int64_t rk, bool diag) {
  for (int64_t i0 = 0; i0 < rq; i0 += h.rmax) {
    const int rows = static_cast<int>(std::min<int64_t>(h.rmax, rq - i0));
    const int64_t w = pad16(diag ? std::min(rk, i0 + rows) : rk);
    flash::tile_product<Vec>(rows, w, s + i0 * lds, lds, false, a + i0 * lda, lda, 1, bt, h.Tp, 0, h.D);
  }
}

// The keys of a tile that query row i (relative to the tile) sees, and how far its row group's
// products reach (the diagonal tile's group of rows i0 .. i0 + rows - 1 stops at key i0 + rows).
int64_t keys_seen(int64_t i, int64_t rk, bool diag) { return diag ? i + 1 : rk; }
int64_t group_reach(int64_t i0, int rows, int64_t rk, bool diag) { return diag ? std::min(rk, i0 + rows) : rk; }

// FlashAttention's online softmax on one tile row (Dao et al. 2022, Alg. 1 lines 9-12): s's n
// scores become p = e^(scale s - m_new), zeros up to rk; m, l updated; returns e^(m_old - m_new),
// the factor of the row's output so far.
[[gnu::always_inline]] inline float online_softmax_row(float* s, int64_t n, int64_t rk, float scale, float& m,
                                                       float& l) {
  float mx = s[0];
#pragma omp simd reduction(max : mx)
  for (int64_t j = 1; j < n; ++j) mx = s[j] > mx ? s[j] : mx;
  const float m_new = std::max(m, mx * scale);
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) s[j] = exp_nonpositive(s[j] * scale - m_new);
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) sum += s[j];
  std::fill(s + n, s + rk, 0.0f);
  const float alpha = exp_nonpositive(m - m_new);  // m = -inf on the first tile: alpha ~1e-38, l = 0
  l = l * alpha + sum;
  m = m_new;
  return alpha;
}

// The forward's per-thread buffers: kt (D, Tp), vp (T, Dp), o (kTile, Dp), s (kTile, Tp): a query
// tile's scores, then probabilities, over all its keys; pd (kTile, kTile): a tile's dropped ones;
// mt (key tiles x kTile): each row's running max after each key tile of the query tile being done.
struct FwdBufs {
  float *kt, *vp, *o, *s, *pd, *mt;
};

// The kept probabilities of query tile [q0, q0 + rq): row i's piece of key tile kb in s (row
// stride ld, as P's) holds e^(scale s - mt) with mt the running max then; P = that e^(mt - m) / l
// now that the tile's m and l are final. Inline, so each clone compiles it with its own vectors and
// FMA (out of line it was baseline code, and exp_nonpositive's fp::fma a libm call there).
[[gnu::always_inline]] inline void store_kept(float* P, const float* s, int64_t ld, const float* mt, const float* m,
                                             const float* l, int64_t rq, int64_t q0) {
  for (int64_t i = 0; i < rq; ++i)
    for (int64_t k0 = 0; k0 <= q0; k0 += kTile) {
      const float f = exp_nonpositive(mt[k0 + i] - m[i]) / l[i];
      const float* from = s + i * ld + k0;
      float* to = P + i * ld + k0;
      const int64_t keys = std::min(kTile, q0 + rq - k0);
#pragma omp simd
      for (int64_t j = 0; j < keys; ++j) to[j] = from[j] * f;
    }
}

// Query tile [q0, q0 + rq) of one (n, h) against the key tiles up to the diagonal: its output
// rows (att, stride ldo) and their lse. index0: the logical index of the head's element (0, 0).
// P: the head's kept probabilities, or null.
template <typename Vec>
[[gnu::always_inline]] inline void forward_query_tile(float* att, float* lse, float* P, const float* q,
                                                      const FwdBufs& b, const Head& h, int64_t q0, uint64_t index0,
                                                      const AttnDropout& drop) {
  const int64_t rq = std::min(kTile, h.T - q0);
  const int64_t ldp = pad16(q0 + rq);  // b.s holds the query tile's rows over all its keys
  float m[kTile], l[kTile];
  std::fill(m, m + rq, -INFINITY);
  std::fill(l, l + rq, 0.0f);
  std::fill(b.o, b.o + rq * h.Dp, 0.0f);
  for (int64_t k0 = 0; k0 <= q0; k0 += kTile) {
    const int64_t rk = std::min(kTile, h.T - k0);
    const bool diag = k0 == q0;
    float* const st = b.s + k0;
    tile_scores<Vec>(st, ldp, q + q0 * h.ld, h.ld, b.kt + k0, h, rq, rk, diag);
    for (int64_t i = 0; i < rq; ++i) {
      float* s = st + i * ldp;
      const float alpha = online_softmax_row(s, keys_seen(i, rk, diag), rk, h.scale, m[i], l[i]);
      b.mt[k0 + i] = m[i];
      float* o = b.o + i * h.Dp;
#pragma omp simd
      for (int64_t d = 0; d < h.Dp; ++d) o[d] *= alpha;
      if (drop.p > 0)
        dropout_logical(b.pd + i * kTile, s, rk, index0 + static_cast<uint64_t>((q0 + i) * h.T + k0), drop);
    }
    const float* p = drop.p > 0 ? b.pd : st;
    const int64_t lda = drop.p > 0 ? kTile : ldp;
    for (int64_t i0 = 0; i0 < rq; i0 += h.rmax) {
      const int rows = static_cast<int>(std::min<int64_t>(h.rmax, rq - i0));
      flash::tile_product<Vec>(rows, h.Dp, b.o + i0 * h.Dp, h.Dp, true, p + i0 * lda, lda, 1, b.vp + k0 * h.Dp, h.Dp,
                               0, group_reach(i0, rows, rk, diag));
    }
  }
  if (P) store_kept(P + h.kept->offset[q0 / kTile], b.s, ldp, b.mt, m, l, rq, q0);
  for (int64_t i = 0; i < rq; ++i) {
    const float inv = 1.0f / l[i];
    for (int64_t d = 0; d < h.D; ++d) att[(q0 + i) * h.ldo + d] = b.o[i * h.Dp + d] * inv;
    if (lse) lse[q0 + i] = m[i] + std::log(l[i]);
  }
}

// One (n, h): att (T, D; stride ldo) and lse (T) from q, k, v (T, D; stride ld).
template <typename Vec>
[[gnu::always_inline]] inline void head_forward_body(float* att, float* lse, float* P, const float* q, const float* k,
                                                     const float* v, const Head& h, uint64_t index0,
                                                     const AttnDropout& drop) {
  const int64_t tiles_rows = (h.T + kTile - 1) / kTile * kTile;
  float* buf = thread_floats(h.D * h.Tp + h.T * h.Dp + kTile * h.Dp + kTile * h.Tp + kTile * kTile + tiles_rows);
  FwdBufs b;
  b.kt = buf, b.vp = b.kt + h.D * h.Tp, b.o = b.vp + h.T * h.Dp, b.s = b.o + kTile * h.Dp, b.pd = b.s + kTile * h.Tp;
  b.mt = b.pd + kTile * kTile;
  pack_transposed(b.kt, k, h);
  pack_rows(b.vp, v, h.ld, h);
  for (int64_t q0 = 0; q0 < h.T; q0 += kTile) forward_query_tile<Vec>(att, lse, P, q, b, h, q0, index0, drop);
}

// The backward's per-thread buffers: qp, kp, dop (T, Dp): q, k, dO packed; kt, vt (D, Tp): k and v
// transposed; dq, dk, dv (T, Dp): the sums; di (Tp): D_i = rowsum(dO_i * O_i); p, ds, pd
// (kTile, kTile): a tile's P, dS and dropped P.
struct BwdBufs {
  float *qp, *kp, *dop, *kt, *vt, *dq, *dk, *dv, *di, *p, *ds, *pd;
};

BwdBufs backward_bufs(const Head& h) {
  const int64_t rows = h.T * h.Dp, cols = h.D * h.Tp, tile = kTile * kTile;
  float* f = thread_floats(6 * rows + 2 * cols + h.Tp + 3 * tile);
  BwdBufs b;
  b.qp = f, b.kp = b.qp + rows, b.dop = b.kp + rows, b.dq = b.dop + rows, b.dk = b.dq + rows, b.dv = b.dk + rows;
  b.kt = b.dv + rows, b.vt = b.kt + cols, b.di = b.vt + cols, b.p = b.di + h.Tp, b.ds = b.p + tile, b.pd = b.ds + tile;
  return b;
}

// A tile's probabilities as the backward's products read them: P and the dropped P (the same
// where there is no dropout), each with its row stride.
struct TileP {
  const float* p;
  int64_t ldp;
  const float* pd;
  int64_t ldpd;
};

// P (kept: the head's packed P at query tile q0, key tile k0; else recomputed from lse into b.p)
// and dS = scale P (dP - D_i), dP = dropout(dO v^T), of query tile [q0, q0 + rq) against key tile
// [k0, k0 + rk), dS into b.ds, the dropped P into b.pd.
template <typename Vec>
[[gnu::always_inline]] inline TileP backward_tile_ds(const BwdBufs& b, const Head& h, const float* lse,
                                                     const float* P, int64_t q0, int64_t k0, int64_t rq, int64_t rk,
                                                     uint64_t index0, const AttnDropout& drop) {
  const bool diag = k0 == q0;
  const DropoutKeep<float> keep(drop.p);
  TileP t{b.p, kTile, b.pd, kTile};
  if (P) t.p = P + h.kept->offset[q0 / kTile] + k0, t.ldp = h.kept->stride[q0 / kTile];
  if (!P) tile_scores<Vec>(b.p, kTile, b.qp + q0 * h.Dp, h.Dp, b.kt + k0, h, rq, rk, diag);
  tile_scores<Vec>(b.ds, kTile, b.dop + q0 * h.Dp, h.Dp, b.vt + k0, h, rq, rk, diag);
  for (int64_t i = 0; i < rq; ++i) {
    const int64_t n = keys_seen(i, rk, diag);
    float* ds = b.ds + i * kTile;
    const float* p = t.p + i * t.ldp;
    if (!P) {
      const float shift = lse[q0 + i];
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) b.p[i * kTile + j] = exp_nonpositive(b.p[i * kTile + j] * h.scale - shift);
      std::fill(b.p + i * kTile + n, b.p + i * kTile + rk, 0.0f);
    }
    if (drop.p > 0) {  // one draw of the row's mask, applied to P and to dP
      uint32_t words[kTile];
      philox_words(words, rk, index0 + static_cast<uint64_t>((q0 + i) * h.T + k0), drop.seed, drop.stream);
      dropout_apply_words(b.pd + i * kTile, p, rk, words, keep);
      dropout_apply_words(ds, ds, n, words, keep);
    }
    const float di = b.di[q0 + i];
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) ds[j] = h.scale * p[j] * (ds[j] - di);
    std::fill(ds + n, ds + rk, 0.0f);
  }
  if (drop.p == 0) t.pd = t.p, t.ldpd = t.ldp;
  return t;
}

// dV += Pd^T dO, dK += dS^T Q (on the diagonal tile key j takes the rows i >= j only) and
// dQ += dS K for one tile (dS already carries the scale).
template <typename Vec>
[[gnu::always_inline]] inline void backward_tile_products(const BwdBufs& b, const Head& h, const TileP& t,
                                                          int64_t q0, int64_t k0, int64_t rq, int64_t rk) {
  const bool diag = k0 == q0;
  for (int64_t j0 = 0; j0 < rk; j0 += h.rmax) {
    const int rows = static_cast<int>(std::min<int64_t>(h.rmax, rk - j0));
    const int64_t i_begin = diag ? j0 : 0;
    flash::tile_product<Vec>(rows, h.Dp, b.dv + (k0 + j0) * h.Dp, h.Dp, true, t.pd + j0, 1, t.ldpd,
                             b.dop + q0 * h.Dp, h.Dp, i_begin, rq);
    flash::tile_product<Vec>(rows, h.Dp, b.dk + (k0 + j0) * h.Dp, h.Dp, true, b.ds + j0, 1, kTile,
                             b.qp + q0 * h.Dp, h.Dp, i_begin, rq);
  }
  for (int64_t i0 = 0; i0 < rq; i0 += h.rmax) {
    const int rows = static_cast<int>(std::min<int64_t>(h.rmax, rq - i0));
    flash::tile_product<Vec>(rows, h.Dp, b.dq + (q0 + i0) * h.Dp, h.Dp, true, b.ds + i0 * kTile, kTile, 1,
                             b.kp + k0 * h.Dp, h.Dp, 0, group_reach(i0, rows, rk, diag));
  }
}

// The head's operands packed (k transposed only where P is recomputed), D_i and the zeroed sums.
[[gnu::always_inline]] inline void backward_prepare(const BwdBufs& b, const Head& h, bool recompute, const float* g,
                                                    const float* o, const float* q, const float* k, const float* v) {
  pack_rows(b.qp, q, h.ld, h);
  pack_rows(b.kp, k, h.ld, h);
  pack_rows(b.dop, g, h.ldo, h);
  if (recompute) pack_transposed(b.kt, k, h);
  pack_transposed(b.vt, v, h);
  // D_t = sum over d of dO[t][d] O[t][d], each row's sum in d's order, 8 rows' chains side by side
  // (one chain at a time waits on each multiply-add's latency: 12% of the backward core's time).
  constexpr int64_t kRows = 8;
  for (int64_t t0 = 0; t0 < h.T; t0 += kRows) {
    const int64_t n = std::min(kRows, h.T - t0);
    float dot[kRows] = {};
    for (int64_t d = 0; d < h.D; ++d)
      for (int64_t j = 0; j < n; ++j) dot[j] += b.dop[(t0 + j) * h.Dp + d] * o[(t0 + j) * h.ldo + d];
    std::copy(dot, dot + n, b.di + t0);
  }
  std::fill(b.dq, b.dq + 3 * h.T * h.Dp, 0.0f);  // dq, dk, dv are adjacent
}

// One (n, h): dq, dk, dv (T, D; stride ld, at dq, dq + C, dq + 2C) from g = d att, o = att
// (stride ldo), q, k, v and lse; FlashAttention-2's order: key tiles outer, query tiles inner.
template <typename Vec>
[[gnu::always_inline]] inline void head_backward_body(float* dq, int64_t C, const float* g, const float* o,
                                                      const float* q, const float* lse, const float* P, const Head& h,
                                                      uint64_t index0, const AttnDropout& drop) {
  const BwdBufs b = backward_bufs(h);
  backward_prepare(b, h, P == nullptr, g, o, q, q + C, q + 2 * C);
  for (int64_t k0 = 0; k0 < h.T; k0 += kTile) {
    const int64_t rk = std::min(kTile, h.T - k0);
    for (int64_t q0 = k0; q0 < h.T; q0 += kTile) {
      const int64_t rq = std::min(kTile, h.T - q0);
      const TileP t = backward_tile_ds<Vec>(b, h, lse, P, q0, k0, rq, rk, index0, drop);
      backward_tile_products<Vec>(b, h, t, q0, k0, rq, rk);
    }
  }
  const float* sums[3] = {b.dq, b.dk, b.dv};
  for (int w = 0; w < 3; ++w)
    for (int64_t t = 0; t < h.T; ++t) std::copy(sums[w] + t * h.Dp, sums[w] + t * h.Dp + h.D, dq + w * C + t * h.ld);
}

// The clones of the two head functions (kernels/cpu/isa.h's scheme, with FMA in the AVX2 clone:
// the tile kernel is all multiply-adds), each on the vectors of its own width.
#if defined(__x86_64__) && defined(__GNUC__)
#define DP_FLASH_CLONES(ret, name, params, args)                                                  \
  __attribute__((target("avx512f"))) ret name##_avx512_ params { return name##_body<flash::V16> args; } \
  __attribute__((target("avx2,fma"))) ret name##_avx2_ params { return name##_body<flash::V8> args; }   \
  ret name##_baseline_ params { return name##_body<flash::V4> args; }                            \
  DP_ISA_CLONE_DISPATCH_(ret, name, params)
#else
#define DP_FLASH_CLONES(ret, name, params, args)                                                  \
  ret name##_avx512_ params { return name##_body<flash::V4> args; }                              \
  ret name##_avx2_ params { return name##_body<flash::V4> args; }                                \
  ret name##_baseline_ params { return name##_body<flash::V4> args; }                            \
  DP_ISA_CLONE_DISPATCH_(ret, name, params)
#endif

DP_FLASH_CLONES(void, head_forward,
                (float* att, float* lse, float* P, const float* q, const float* k, const float* v, const Head& h,
                 uint64_t index0, const AttnDropout& drop),
                (att, lse, P, q, k, v, h, index0, drop))
DP_FLASH_CLONES(void, head_backward,
                (float* dq, int64_t C, const float* g, const float* o, const float* q, const float* lse,
                 const float* P, const Head& h, uint64_t index0, const AttnDropout& drop),
                (dq, C, g, o, q, lse, P, h, index0, drop))

Head head_shape(int64_t T, int64_t H, int64_t D, CloneIsa isa, const FlashKept* kept) {
  return {T, D, pad16(T), pad16(D), 3 * H * D, H * D, 1.0f / std::sqrt(static_cast<float>(D)),
          isa == CloneIsa::Avx512 ? 4 : 3, kept};
}

}  // namespace

FlashKept::FlashKept(int64_t t) : T(t) {
  for (int64_t q0 = 0; q0 < T; q0 += kTile) {
    const int64_t rows = std::min(kTile, T - q0);
    offset.push_back(packed);
    stride.push_back(pad16(q0 + rows));
    packed += rows * stride.back();
  }
}

void flash_forward(float* att, float* lse, float* P, const float* qkv, int64_t N, int64_t T, int64_t H, int64_t D,
                   const AttnDropout& drop) {
  const CloneIsa isa = clone_isa();
  const auto head = head_forward_clone(isa);
  const FlashKept kept(T);
  const Head hd = head_shape(T, H, D, isa, P ? &kept : nullptr);
  const int64_t C = H * D;
#pragma omp parallel for schedule(static)
  for (int64_t nh = 0; nh < N * H; ++nh) {
    const int64_t n = nh / H, h = nh % H;
    const float* q = qkv + n * T * 3 * C + h * D;
    head(att + n * T * C + h * D, lse ? lse + nh * T : nullptr, P ? P + nh * kept.packed : nullptr, q, q + C, q + 2 * C, hd,
         static_cast<uint64_t>(nh * T * T), drop);
  }
}

void flash_backward(float* dqkv, const float* datt, const float* qkv, const float* att, const float* lse,
                    const float* P, int64_t N, int64_t T, int64_t H, int64_t D, const AttnDropout& drop) {
  const CloneIsa isa = clone_isa();
  const auto head = head_backward_clone(isa);
  const FlashKept kept(T);
  const Head hd = head_shape(T, H, D, isa, P ? &kept : nullptr);
  const int64_t C = H * D;
#pragma omp parallel for schedule(static)
  for (int64_t nh = 0; nh < N * H; ++nh) {
    const int64_t n = nh / H, h = nh % H, off = n * T * C + h * D;
    head(dqkv + n * T * 3 * C + h * D, C, datt + off, att + off, qkv + n * T * 3 * C + h * D,
         lse ? lse + nh * T : nullptr,
         P ? P + nh * kept.packed : nullptr, hd,
         static_cast<uint64_t>(nh * T * T), drop);
  }
}

}  // namespace dp::kernels::cpu
