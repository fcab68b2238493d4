// defines: what the own batch-norm kernels (batchnorm2d_reduce.cu, batchnorm2d_apply.cu) share:
// Pack<T, V> (V values of T moved by one load or store: 16 bytes for V = 16 / sizeof(T)),
// kVec<T> (that V), load_pack / store_pack, and aligned16 (the host's test of a pointer).
// Device code only (.cu files).
#pragma once
#include <cstdint>

#include "kernels/cuda/convert.cuh"

namespace dp::kernels::cuda::bn {

// V neighbouring values; aligned to its size so that nvcc moves it with one vector instruction
// (ld.global.v4.u32 for 16 bytes), as torch's aligned_vector.
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

// Values per 16-byte load: 8 for bf16/f16, 4 for f32.
template <typename T>
inline constexpr int kVec = static_cast<int>(16 / sizeof(T));

template <int V, typename T>
__device__ __forceinline__ Pack<T, V> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T, V>*>(p);
}
template <int V, typename T>
__device__ __forceinline__ void store_pack(T* p, const Pack<T, V>& v) {
  *reinterpret_cast<Pack<T, V>*>(p) = v;
}

// A null pointer counts as aligned (an absent operand).
inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace dp::kernels::cuda::bn
