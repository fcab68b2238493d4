// defines: the device side of an element-wise pass in 16-byte vectors (the split is
// pass_shape.h's): Pack<T, W> (W elements moved by one aligned access), load_pack / store_pack,
// Width<W>, vec_for_each (the grid-stride loops over a VecSplit) and, for the host wrappers,
// pass_grid (the grid from the current device's SM count).
//
// A kernel writes its element math once, as a generic lambda over the width:
//   vec_for_each<W>(n, split, [&](int64_t i, auto w) {
//     constexpr int V = decltype(w)::value;      // W for a vector, 1 for a head or tail element
//     const Pack<float, V> a = load_pack<V>(x + i);
//     Pack<float, V> r;
//     for (int k = 0; k < V; ++k) r.v[k] = f(a.v[k]);
//     store_pack<V>(y + i, r);
//   });
// so a vector computes each of its elements exactly as a scalar does (the same bits either way).
// An aligned Pack is loaded and stored as one 128-bit (or 64-bit) access by nvcc, as PyTorch's
// aligned_vector (ATen/native/cuda/MemoryAccess.cuh) is. Header for .cu files (C++17).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/pass_shape.h"
#include "kernels/cuda/sm_count.h"

namespace dp::kernels::cuda {

template <typename T, int W>
struct alignas(sizeof(T) * W) Pack {
  T v[W];
};

template <int W, typename T>
__device__ __forceinline__ Pack<T, W> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T, W>*>(p);
}
template <int W, typename T>
__device__ __forceinline__ void store_pack(T* p, const Pack<T, W>& v) {
  *reinterpret_cast<Pack<T, W>*>(p) = v;
}

template <int W>
using Width = std::integral_constant<int, W>;

// Grid-stride over the split of n elements: f(i, Width<W>{}) for every vector (elements i ..
// i + W - 1, all operands aligned there), then f(i, Width<1>{}) for every head and tail element.
// s.width must be W (the host wrapper made s with vec_split(n, W, ...)).
template <int W, typename F>
__device__ __forceinline__ void vec_for_each(int64_t n, const VecSplit& s, F&& f) {
  const int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t v = first; v < s.vectors; v += stride) f(s.head + v * W, Width<W>{});
  const int64_t body = s.vectors * W, scalars = n - body;
  for (int64_t r = first; r < scalars; r += stride) f(r < s.head ? r : r + body, Width<1>{});
}

// The blocks of kThreads for the pass (host).
inline unsigned pass_grid(const VecSplit& s, int64_t n) { return pass_blocks(s.items(n), sm_count(), kThreads); }

}  // namespace dp::kernels::cuda
