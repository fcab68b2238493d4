#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/block_sum.cuh"
#include "kernels/cuda/convert.cuh"
#include "kernels/cuda/dispatch.cuh"
#include "kernels/host_device.h"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/shared_memory.cuh"
#include "kernels/cuda/vec_pass.cuh"

namespace dp::kernels::cuda {
namespace {

// Elements per 16-byte vector of a pass over T (f32: 4, 16-bit: 8): pass_shape.h, vec_pass.cuh.
template <typename T>
constexpr int kW = vec_width(sizeof(T));

// Element I/O: a stored element widened to f32, and an f32 rounded (to nearest even) to it.
template <typename T>
__global__ void relu_forward_kernel(T* y, const T* x, int64_t n, VecSplit split) {
  vec_for_each<kW<T>>(n, split, [&](int64_t i, auto w) {
    constexpr int V = decltype(w)::value;
    const Pack<T, V> a = load_pack<V>(x + i);
    Pack<T, V> r;
    for (int k = 0; k < V; ++k) r.v[k] = to_f32(a.v[k]) < 0.0f ? from_f32<T>(0.0f) : a.v[k];
    store_pack<V>(y + i, r);
  });
}

template <typename T>
__global__ void relu_backward_kernel(T* dx, const T* dy, const T* y, int64_t n, VecSplit split) {
  vec_for_each<kW<T>>(n, split, [&](int64_t i, auto w) {
    constexpr int V = decltype(w)::value;
    const Pack<T, V> g = load_pack<V>(dy + i), out = load_pack<V>(y + i);
    Pack<T, V> r;
    for (int k = 0; k < V; ++k) r.v[k] = to_f32(out.v[k]) > 0.0f ? g.v[k] : from_f32<T>(0.0f);
    store_pack<V>(dx + i, r);
  });
}

template <typename T>
__global__ void add_kernel(T* y, const T* a, const T* b, int64_t n, VecSplit split) {
  vec_for_each<kW<T>>(n, split, [&](int64_t i, auto w) {
    constexpr int V = decltype(w)::value;
    const Pack<T, V> pa = load_pack<V>(a + i), pb = load_pack<V>(b + i);
    Pack<T, V> r;
    for (int k = 0; k < V; ++k) r.v[k] = from_f32<T>(fp::add(to_f32(pa.v[k]), to_f32(pb.v[k])));
    store_pack<V>(y + i, r);
  });
}

// One block per channel (grid-stride over channels): each thread sums its strided share of the
// (outer, inner) elements in f32, then block_sum's fixed tree; thread 0 adds to db once.
template <typename T>
__global__ void bias_grad_kernel(T* db, const T* dy, int64_t outer, int64_t channels, int64_t inner) {
  DP_SHARED(float, part, [kThreads]);
  const int64_t per_channel = outer * inner;
  for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < per_channel; j += kThreads) {
      const int64_t o = j / inner, i = j % inner;
      s = fp::add(s, to_f32(dy[(o * channels + c) * inner + i]));
    }
    const float total = block_sum(part, s);
    if (threadIdx.x == 0) db[c] = from_f32<T>(fp::add(to_f32(db[c]), total));
  }
}

__global__ void scale_kernel(float* y, const float* x, float alpha, int64_t n, VecSplit split) {
  vec_for_each<kW<float>>(n, split, [&](int64_t i, auto w) {
    constexpr int V = decltype(w)::value;
    Pack<float, V> r = load_pack<V>(x + i);
    for (int k = 0; k < V; ++k) r.v[k] = fp::mul(alpha, r.v[k]);
    store_pack<V>(y + i, r);
  });
}

__global__ void divide_kernel(float* x, int64_t n, float divisor, VecSplit split) {
  vec_for_each<kW<float>>(n, split, [&](int64_t i, auto w) {
    constexpr int V = decltype(w)::value;
    Pack<float, V> r = load_pack<V>(x + i);
    for (int k = 0; k < V; ++k) r.v[k] = fp::div(r.v[k], divisor);
    store_pack<V>(x + i, r);
  });
}

// Over the whole (outer, channels, inner) block; element i's channel is (i / inner) % channels.
template <typename T>
__global__ void bias_add_kernel(T* y, const T* b, int64_t total, int64_t channels, int64_t inner, VecSplit split) {
  vec_for_each<kW<T>>(total, split, [&](int64_t i, auto w) {
    constexpr int V = decltype(w)::value;
    Pack<T, V> r = load_pack<V>(y + i);
    for (int k = 0; k < V; ++k) r.v[k] = from_f32<T>(fp::add(to_f32(r.v[k]), to_f32(b[((i + k) / inner) % channels])));
    store_pack<V>(y + i, r);
  });
}

// The launches of the passes, for any element type; n > 0, arguments checked by the caller.
template <typename T>
VecSplit split_of(int64_t n, std::initializer_list<const void*> ptrs) {
  return vec_split(n, kW<T>, sizeof(T), ptrs);
}
template <typename T>
cudaError_t launch_relu_forward(T* y, const T* x, int64_t n, cudaStream_t stream) {
  const VecSplit sp = split_of<T>(n, {y, x});
  DP_LAUNCH(relu_forward_kernel<T>, pass_grid(sp, n), kThreads, 0, stream)(y, x, n, sp);
  DP_RETURN_LAUNCH();
}
template <typename T>
cudaError_t launch_relu_backward(T* dx, const T* dy, const T* y, int64_t n, cudaStream_t stream) {
  const VecSplit sp = split_of<T>(n, {dx, dy, y});
  DP_LAUNCH(relu_backward_kernel<T>, pass_grid(sp, n), kThreads, 0, stream)(dx, dy, y, n, sp);
  DP_RETURN_LAUNCH();
}
template <typename T>
cudaError_t launch_add(T* y, const T* a, const T* b, int64_t n, cudaStream_t stream) {
  const VecSplit sp = split_of<T>(n, {y, a, b});
  DP_LAUNCH(add_kernel<T>, pass_grid(sp, n), kThreads, 0, stream)(y, a, b, n, sp);
  DP_RETURN_LAUNCH();
}
template <typename T>
cudaError_t launch_bias_add(T* y, const T* b, int64_t total, int64_t channels, int64_t inner, cudaStream_t stream) {
  const VecSplit sp = split_of<T>(total, {y});
  DP_LAUNCH(bias_add_kernel<T>, pass_grid(sp, total), kThreads, 0, stream)(y, b, total, channels, inner, sp);
  DP_RETURN_LAUNCH();
}

}  // namespace

cudaError_t relu_forward(float* y, const float* x, int64_t n, cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  return launch_relu_forward(y, x, n, stream);
}

cudaError_t relu_backward(float* dx, const float* dy, const float* y, int64_t n, cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  return launch_relu_backward(dx, dy, y, n, stream);
}

cudaError_t add(float* y, const float* a, const float* b, int64_t n, cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  return launch_add(y, a, b, n, stream);
}

cudaError_t add_inplace(float* dst, const float* src, int64_t n, cudaStream_t stream) {
  return add(dst, dst, src, n, stream);
}

cudaError_t scale(float* y, const float* x, float alpha, int64_t n, cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const VecSplit sp = split_of<float>(n, {y, x});
  DP_LAUNCH(scale_kernel, pass_grid(sp, n), kThreads, 0, stream)(y, x, alpha, n, sp);
  DP_RETURN_LAUNCH();
}

cudaError_t divide(float* x, int64_t n, int divisor, cudaStream_t stream) {
  if (n < 0 || divisor == 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const VecSplit sp = split_of<float>(n, {x});
  DP_LAUNCH(divide_kernel, pass_grid(sp, n), kThreads, 0, stream)(x, n, static_cast<float>(divisor), sp);
  DP_RETURN_LAUNCH();
}

cudaError_t bias_add(float* y, const float* b, int64_t outer, int64_t channels, int64_t inner, cudaStream_t stream) {
  if (outer < 0 || channels < 0 || inner < 0) return cudaErrorInvalidValue;
  const int64_t total = outer * channels * inner;
  if (total == 0) return cudaSuccess;
  return launch_bias_add(y, b, total, channels, inner, stream);
}

bool elementwise_dtype_supported(DType dtype) {
  return dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16;
}

cudaError_t relu_forward(DType dtype, void* y, const void* x, int64_t n, cudaStream_t stream) {
  if (n < 0 || !elementwise_dtype_supported(dtype)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  return dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    return launch_relu_forward(static_cast<T*>(y), static_cast<const T*>(x), n, stream);
  });
}

cudaError_t relu_backward(DType dtype, void* dx, const void* dy, const void* y, int64_t n, cudaStream_t stream) {
  if (n < 0 || !elementwise_dtype_supported(dtype)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  return dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    return launch_relu_backward(static_cast<T*>(dx), static_cast<const T*>(dy), static_cast<const T*>(y), n, stream);
  });
}

cudaError_t add(DType dtype, void* y, const void* a, const void* b, int64_t n, cudaStream_t stream) {
  if (n < 0 || !elementwise_dtype_supported(dtype)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  return dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    return launch_add(static_cast<T*>(y), static_cast<const T*>(a), static_cast<const T*>(b), n, stream);
  });
}

cudaError_t add_inplace(DType dtype, void* dst, const void* src, int64_t n, cudaStream_t stream) {
  return add(dtype, dst, dst, src, n, stream);
}

cudaError_t bias_add(DType dtype, void* y, const void* b, int64_t outer, int64_t channels, int64_t inner,
                     cudaStream_t stream) {
  if (outer < 0 || channels < 0 || inner < 0 || !elementwise_dtype_supported(dtype)) return cudaErrorInvalidValue;
  const int64_t total = outer * channels * inner;
  if (total == 0) return cudaSuccess;
  return dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    return launch_bias_add(static_cast<T*>(y), static_cast<const T*>(b), total, channels, inner, stream);
  });
}

cudaError_t bias_grad(DType dtype, void* db, const void* dy, int64_t outer, int64_t channels, int64_t inner,
                      cudaStream_t stream) {
  if (outer < 0 || channels < 0 || inner < 0 || !elementwise_dtype_supported(dtype)) return cudaErrorInvalidValue;
  if (channels == 0) return cudaSuccess;  // outer * inner == 0 still launches: db += 0 (a no-op on values)
  const unsigned blocks = static_cast<unsigned>(channels < (int64_t{1} << 16) ? channels : (int64_t{1} << 16));
  return dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    DP_LAUNCH(bias_grad_kernel<T>, blocks, kThreads, 0, stream)(
        static_cast<T*>(db), static_cast<const T*>(dy), outer, channels, inner);
    DP_RETURN_LAUNCH();
  });
}

}  // namespace dp::kernels::cuda
