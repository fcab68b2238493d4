#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/accumulate.h"
#include "kernels/host_device.h"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/vec_pass.cuh"

namespace dp::kernels::cuda {
namespace {

__device__ __forceinline__ float widen(uint16_t v, bool bf16) {
  return bf16 ? __bfloat162float(__ushort_as_bfloat16(v)) : __half2float(__ushort_as_half(v));
}
__device__ __forceinline__ uint16_t narrow(float v, bool bf16) {
  return bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(v)) : __half_as_ushort(__float2half_rn(v));
}

constexpr int kW32 = vec_width(sizeof(float));     // f32 + 16-bit operands: 4 per vector
constexpr int kW16 = vec_width(sizeof(uint16_t));  // 16-bit operands only: 8 per vector

__global__ void widen_accumulate_kernel(float* y, const uint16_t* x, int64_t n, bool bf16, VecSplit split) {
  vec_for_each<kW32>(n, split, [&](int64_t i, auto w) {
    constexpr int V = decltype(w)::value;
    Pack<float, V> acc = load_pack<V>(y + i);
    const Pack<uint16_t, V> a = load_pack<V>(x + i);
    for (int k = 0; k < V; ++k) acc.v[k] = fp::add(acc.v[k], widen(a.v[k], bf16));
    store_pack<V>(y + i, acc);
  });
}

__global__ void add_inplace_16_kernel(uint16_t* dst, const uint16_t* src, int64_t n, bool bf16, VecSplit split) {
  vec_for_each<kW16>(n, split, [&](int64_t i, auto w) {
    constexpr int V = decltype(w)::value;
    Pack<uint16_t, V> d = load_pack<V>(dst + i);
    const Pack<uint16_t, V> a = load_pack<V>(src + i);
    for (int k = 0; k < V; ++k) d.v[k] = narrow(fp::add(widen(d.v[k], bf16), widen(a.v[k], bf16)), bf16);
    store_pack<V>(dst + i, d);
  });
}

}  // namespace

cudaError_t widen_accumulate(float* y, const uint16_t* x, int64_t n, bool bf16, cudaStream_t stream) {
  if (n < 0 || (n > 0 && (y == nullptr || x == nullptr))) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const VecSplit sp = vec_split(n, kW32, {{y, sizeof(float)}, {x, sizeof(uint16_t)}});
  DP_LAUNCH(widen_accumulate_kernel, pass_grid(sp, n), kThreads, 0, stream)(y, x, n, bf16, sp);
  DP_RETURN_LAUNCH();
}

cudaError_t add_inplace_16(uint16_t* dst, const uint16_t* src, int64_t n, bool bf16, cudaStream_t stream) {
  if (n < 0 || (n > 0 && (dst == nullptr || src == nullptr))) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const VecSplit sp = vec_split(n, kW16, sizeof(uint16_t), {dst, src});
  DP_LAUNCH(add_inplace_16_kernel, pass_grid(sp, n), kThreads, 0, stream)(dst, src, n, bf16, sp);
  DP_RETURN_LAUNCH();
}

}  // namespace dp::kernels::cuda
