// defines: tile_product, the one product of the tiled causal attention core (flash_core.cpp):
//   C[r][0, W) (+)= sum_{k in [k0, k1)} A(r, k) B[k][0, W),  r < rows <= 4, W = 16 nv <= 64,
// A(r, k) = a[r ars + k aks] (any strides: a tile or its transpose, read one scalar at a time),
// B row-major (ldb), C row-major (ldc). Register-blocked as a BLAS micro-kernel (Goto & van de
// Geijn 2008): rows x nv accumulators of one vector each (GCC vector extensions: Vec is V16 in the
// AVX-512 clone, V8 in the AVX2 one, V4 in the baseline; a vector wider than the clone's registers
// would be lowered to scalars), each B row loaded once per k and used by every row; the columns
// in chunks of 4 vectors. Every operand the core passes is padded to 16 floats (zeros).
// Header-only and always-inline on purpose: it is compiled inside each clone of its caller.
#pragma once
#include <cstdint>
#include <cstring>

namespace dp::kernels::cpu::flash {

typedef float V16 __attribute__((vector_size(64)));
typedef float V8 __attribute__((vector_size(32)));
typedef float V4 __attribute__((vector_size(16)));

// Loads and stores are memcpy's (unaligned vmovups), written in place: a helper taking or returning a
// vector by value would be compiled outside the clones' ISA (GCC's -Wpsabi).
template <typename Vec>
constexpr int kLanes = static_cast<int>(sizeof(Vec) / sizeof(float));

template <typename Vec, int R, int NV>
[[gnu::always_inline]] inline void tile_kernel(float* c, int64_t ldc, bool load, const float* a, int64_t ars,
                                               int64_t aks, const float* b, int64_t ldb, int64_t k0, int64_t k1) {
  constexpr int L = kLanes<Vec>;
  Vec acc[R][NV];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      acc[r][v] = Vec{};
      if (load) std::memcpy(&acc[r][v], c + r * ldc + L * v, sizeof(Vec));
    }
  for (int64_t k = k0; k < k1; ++k) {
    Vec bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) std::memcpy(&bv[v], b + k * ldb + L * v, sizeof(Vec));
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const float s = a[r * ars + k * aks];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] += s * bv[v];
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) std::memcpy(c + r * ldc + L * v, &acc[r][v], sizeof(Vec));
}

template <typename Vec, int R>
[[gnu::always_inline]] inline void tile_rows(int nv, float* c, int64_t ldc, bool load, const float* a, int64_t ars,
                                             int64_t aks, const float* b, int64_t ldb, int64_t k0, int64_t k1) {
  switch (nv) {
    case 1: return tile_kernel<Vec, R, 1>(c, ldc, load, a, ars, aks, b, ldb, k0, k1);
    case 2: return tile_kernel<Vec, R, 2>(c, ldc, load, a, ars, aks, b, ldb, k0, k1);
    case 3: return tile_kernel<Vec, R, 3>(c, ldc, load, a, ars, aks, b, ldb, k0, k1);
    default: return tile_kernel<Vec, R, 4>(c, ldc, load, a, ars, aks, b, ldb, k0, k1);
  }
}

// The product for `rows` (1..4) rows and `width` columns (a multiple of 16), cut into chunks of
// at most 4 vectors. load false: C is overwritten (beta 0), true: added to.
template <typename Vec>
[[gnu::always_inline]] inline void tile_product(int rows, int64_t width, float* c, int64_t ldc, bool load,
                                                const float* a, int64_t ars, int64_t aks, const float* b, int64_t ldb,
                                                int64_t k0, int64_t k1) {
  constexpr int L = kLanes<Vec>;
  for (int64_t c0 = 0; c0 < width; c0 += 4 * L) {
    const int nv = static_cast<int>(width - c0 >= 4 * L ? 4 : (width - c0) / L);
    float* cc = c + c0;
    const float* bb = b + c0;
    switch (rows) {
      case 1: tile_rows<Vec, 1>(nv, cc, ldc, load, a, ars, aks, bb, ldb, k0, k1); break;
      case 2: tile_rows<Vec, 2>(nv, cc, ldc, load, a, ars, aks, bb, ldb, k0, k1); break;
      case 3: tile_rows<Vec, 3>(nv, cc, ldc, load, a, ars, aks, bb, ldb, k0, k1); break;
      default: tile_rows<Vec, 4>(nv, cc, ldc, load, a, ars, aks, bb, ldb, k0, k1); break;
    }
  }
}

}  // namespace dp::kernels::cpu::flash
