#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/convert.cuh"
#include "kernels/cuda/dispatch.cuh"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/vec_pass.cuh"
#include "models/layers/gelu/gelu_kernels.h"

namespace dp::kernels::cuda {
namespace {

template <typename T>
constexpr int kW = vec_width(sizeof(T));

constexpr float kSqrt2OverPi = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kCubic = 0.044715f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;  // 1 / sqrt(2 pi)

// The element math of gelu_ref.cpp, in f32.
__device__ __forceinline__ float gelu(float x, bool tanh_approximation) {
  if (tanh_approximation) return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + kCubic * x * x * x)));
  return 0.5f * x * (1.0f + erff(x * kInvSqrt2));
}

__device__ __forceinline__ float gelu_grad(float x, bool tanh_approximation) {
  if (tanh_approximation) {
    const float t = tanhf(kSqrt2OverPi * (x + kCubic * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
  }
  return 0.5f * (1.0f + erff(x * kInvSqrt2)) + x * expf(-0.5f * x * x) * kInvSqrt2Pi;
}

template <typename T>
__global__ void gelu_forward_kernel(T* y, const T* x, int64_t n, bool tanh_approximation, VecSplit split) {
  vec_for_each<kW<T>>(n, split, [&](int64_t i, auto w) {
    constexpr int V = decltype(w)::value;
    const Pack<T, V> a = load_pack<V>(x + i);
    Pack<T, V> r;
    for (int k = 0; k < V; ++k) r.v[k] = from_f32<T>(gelu(to_f32(a.v[k]), tanh_approximation));
    store_pack<V>(y + i, r);
  });
}

template <typename T>
__global__ void gelu_backward_kernel(T* dx, const T* dy, const T* x, int64_t n, bool tanh_approximation,
                                     VecSplit split) {
  vec_for_each<kW<T>>(n, split, [&](int64_t i, auto w) {
    constexpr int V = decltype(w)::value;
    const Pack<T, V> g = load_pack<V>(dy + i), a = load_pack<V>(x + i);
    Pack<T, V> r;
    for (int k = 0; k < V; ++k) r.v[k] = from_f32<T>(to_f32(g.v[k]) * gelu_grad(to_f32(a.v[k]), tanh_approximation));
    store_pack<V>(dx + i, r);
  });
}

}  // namespace

cudaError_t gelu_forward(DType dtype, void* y, const void* x, int64_t n, bool tanh_approximation, cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  return dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (n == 0) return cudaSuccess;
    const VecSplit sp = vec_split(n, kW<T>, sizeof(T), {y, x});
    DP_LAUNCH(gelu_forward_kernel<T>, pass_grid(sp, n), kThreads, 0, stream)
    (static_cast<T*>(y), static_cast<const T*>(x), n, tanh_approximation, sp);
    DP_RETURN_LAUNCH();
  });
}

cudaError_t gelu_backward(DType dtype, void* dx, const void* dy, const void* x, int64_t n, bool tanh_approximation,
                          cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  return dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (n == 0) return cudaSuccess;
    const VecSplit sp = vec_split(n, kW<T>, sizeof(T), {dx, dy, x});
    DP_LAUNCH(gelu_backward_kernel<T>, pass_grid(sp, n), kThreads, 0, stream)
    (static_cast<T*>(dx), static_cast<const T*>(dy), static_cast<const T*>(x), n, tanh_approximation, sp);
    DP_RETURN_LAUNCH();
  });
}

}  // namespace dp::kernels::cuda
