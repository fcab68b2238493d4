#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/cast.h"
#include "kernels/host_device.h"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/vec_pass.cuh"

namespace dp::kernels::cuda {
namespace {

// Every pass here has an f32 side: 4 elements per vector (16 bytes of f32, 8 of 16-bit).
constexpr int kW = vec_width(sizeof(float));

struct ToBf16 {
  __device__ uint16_t operator()(float v) const { return __bfloat16_as_ushort(__float2bfloat16_rn(v)); }
};
struct FromBf16 {
  __device__ float operator()(uint16_t v) const { return __bfloat162float(__ushort_as_bfloat16(v)); }
};
struct ToF16 {
  __device__ uint16_t operator()(float v) const { return __half_as_ushort(__float2half_rn(v)); }
};
struct FromF16 {
  __device__ float operator()(uint16_t v) const { return __half2float(__ushort_as_half(v)); }
};

// y[i] = Op(x[i]).
template <typename Out, typename In, typename Op>
__global__ void convert_kernel(Out* y, const In* x, int64_t n, VecSplit split) {
  vec_for_each<kW>(n, split, [&](int64_t i, auto w) {
    constexpr int V = decltype(w)::value;
    const Pack<In, V> a = load_pack<V>(x + i);
    Pack<Out, V> r;
    for (int k = 0; k < V; ++k) r.v[k] = Op{}(a.v[k]);
    store_pack<V>(y + i, r);
  });
}

// g *= inv_scale in place with the found-inf flag: one flag write per thread that saw a
// non-finite value (benign races, all write 1).
__global__ void unscale_kernel(float* g, int64_t n, float inv_scale, float* found_inf, VecSplit split) {
  bool bad = false;
  vec_for_each<kW>(n, split, [&](int64_t i, auto w) {
    constexpr int V = decltype(w)::value;
    Pack<float, V> a = load_pack<V>(g + i);
    for (int k = 0; k < V; ++k) {
      bad |= !isfinite(a.v[k]);
      a.v[k] = fp::mul(a.v[k], inv_scale);
    }
    store_pack<V>(g + i, a);
  });
  if (bad) *found_inf = 1.0f;
}

template <typename Out, typename In, typename Op>
cudaError_t convert(Out* y, const In* x, int64_t n, cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const VecSplit sp = vec_split(n, kW, {{y, sizeof(Out)}, {x, sizeof(In)}});
  DP_LAUNCH(convert_kernel<Out, In, Op>, pass_grid(sp, n), kThreads, 0, stream)(y, x, n, sp);
  DP_RETURN_LAUNCH();
}

}  // namespace

cudaError_t f32_to_bf16(uint16_t* y, const float* x, int64_t n, cudaStream_t stream) {
  return convert<uint16_t, float, ToBf16>(y, x, n, stream);
}
cudaError_t bf16_to_f32(float* y, const uint16_t* x, int64_t n, cudaStream_t stream) {
  return convert<float, uint16_t, FromBf16>(y, x, n, stream);
}
cudaError_t f32_to_f16(uint16_t* y, const float* x, int64_t n, cudaStream_t stream) {
  return convert<uint16_t, float, ToF16>(y, x, n, stream);
}
cudaError_t f16_to_f32(float* y, const uint16_t* x, int64_t n, cudaStream_t stream) {
  return convert<float, uint16_t, FromF16>(y, x, n, stream);
}
cudaError_t narrow_from_f32(DType dtype, void* y, const float* x, int64_t n, cudaStream_t stream) {
  auto* d = static_cast<uint16_t*>(y);
  if (dtype == DType::BF16) return f32_to_bf16(d, x, n, stream);
  if (dtype == DType::F16) return f32_to_f16(d, x, n, stream);
  return cudaErrorInvalidValue;
}
cudaError_t widen_to_f32(DType dtype, float* y, const void* x, int64_t n, cudaStream_t stream) {
  const auto* s = static_cast<const uint16_t*>(x);
  if (dtype == DType::BF16) return bf16_to_f32(y, s, n, stream);
  if (dtype == DType::F16) return f16_to_f32(y, s, n, stream);
  return cudaErrorInvalidValue;
}
cudaError_t unscale_f32(float* g, int64_t n, float inv_scale, float* found_inf, cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const VecSplit sp = vec_split(n, kW, {{g, sizeof(float)}});
  DP_LAUNCH(unscale_kernel, pass_grid(sp, n), kThreads, 0, stream)(g, n, inv_scale, found_inf, sp);
  DP_RETURN_LAUNCH();
}

}  // namespace dp::kernels::cuda
