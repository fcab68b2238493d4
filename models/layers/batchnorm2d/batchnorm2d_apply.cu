#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "models/layers/batchnorm2d/batchnorm2d_apply.h"
#include "models/layers/batchnorm2d/batchnorm2d_reduce.h"
#include "models/layers/batchnorm2d/batchnorm2d_vec.cuh"
#include "kernels/cuda/convert.cuh"
#include "kernels/cuda/dispatch.cuh"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/launch.cuh"

namespace dp::kernels::cuda {
namespace {
using bn::load_pack;
using bn::Pack;
using bn::store_pack;

constexpr int kPlaneThreads = 256;         // NCHW: threads along a plane
constexpr int64_t kMaxPlaneBlocks = 64;     // NCHW: blocks along one plane, at most
constexpr int64_t kMaxPlanes = 65535;       // NCHW: gridDim.y (planes are strided beyond it)

__device__ __forceinline__ float relu(float v) { return v > 0.0f ? v : 0.0f; }

// The forward's element: act((x - mean) * scale + shift [+ r]).
struct FwdCoef {
  float mean, scale, shift;
};
// The backward's element: g = dy [masked]; dx = (k g + c1) - (x - mean) c2.
struct BwdCoef {
  float mean, k, c1, c2;
};

template <typename T, int V>
__device__ __forceinline__ void fwd_pack(T* y, const T* x, const T* r, bool relu_on, const FwdCoef* cf, int64_t off,
                                         int stride_coef) {
  const Pack<T, V> xv = load_pack<V>(x + off);
  Pack<T, V> rv{}, out;
  if (r) rv = load_pack<V>(r + off);
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const FwdCoef& c = cf[k * stride_coef];
    float v = (to_f32(xv.v[k]) - c.mean) * c.scale + c.shift;
    if (r) v += to_f32(rv.v[k]);
    out.v[k] = from_f32<T>(relu_on ? relu(v) : v);
  }
  store_pack<V>(y + off, out);
}

template <typename T, int V>
__device__ __forceinline__ void bwd_pack(T* dx, T* dr, const T* dy, const T* relu_y, const T* x, const BwdCoef* cf,
                                         int64_t off, int stride_coef) {
  const Pack<T, V> gv = load_pack<V>(dy + off);
  Pack<T, V> yv{}, xv{}, dxv, drv;
  if (relu_y) yv = load_pack<V>(relu_y + off);
  if (dx) xv = load_pack<V>(x + off);
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const float g = relu_y && !(to_f32(yv.v[k]) > 0.0f) ? 0.0f : to_f32(gv.v[k]);
    drv.v[k] = from_f32<T>(g);
    const BwdCoef& c = cf[k * stride_coef];
    dxv.v[k] = from_f32<T>((c.k * g + c.c1) - (to_f32(xv.v[k]) - c.mean) * c.c2);
  }
  if (dx) store_pack<V>(dx + off, dxv);
  if (dr) store_pack<V>(dr + off, drv);
}

// NHWC: thread (tx, ty) of block (t, p) owns channels c0 .. c0+V-1 (c0 = (t bx + tx) V), keeps
// their coefficients in registers and walks rows begin+ty, begin+ty+by, ... of chunk p.
template <typename T, int V>
__global__ void fwd_nhwc_kernel(T* y, const T* x, const T* r, bool relu_on, const float* mean, const float* scale,
                                const float* shift, int64_t C, int64_t M, int64_t chunk_len) {
  const int64_t c0 = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) * V;
  if (c0 >= C) return;
  FwdCoef cf[V];
#pragma unroll
  for (int k = 0; k < V; ++k) cf[k] = {mean[c0 + k], scale[c0 + k], shift[c0 + k]};
  const int64_t begin = blockIdx.y * chunk_len, end = min(M, begin + chunk_len);
  for (int64_t m = begin + threadIdx.y; m < end; m += blockDim.y) fwd_pack<T, V>(y, x, r, relu_on, cf, m * C + c0, 1);
}

template <typename T, int V>
__global__ void bwd_nhwc_kernel(T* dx, T* dr, const T* dy, const T* relu_y, const T* x, const float* mean,
                                const float* k, const float* c1, const float* c2, int64_t C, int64_t M,
                                int64_t chunk_len) {
  const int64_t c0 = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) * V;
  if (c0 >= C) return;
  BwdCoef cf[V];
#pragma unroll
  for (int j = 0; j < V; ++j) cf[j] = {mean[c0 + j], k[c0 + j], c1[c0 + j], c2[c0 + j]};
  const int64_t begin = blockIdx.y * chunk_len, end = min(M, begin + chunk_len);
  for (int64_t m = begin + threadIdx.y; m < end; m += blockDim.y)
    bwd_pack<T, V>(dx, dr, dy, relu_y, x, cf, m * C + c0, 1);
}

// NCHW: planes (n, c) along grid y (strided beyond 65535), vectors of V values of a plane along
// grid x and the block (V divides HW); one channel's coefficients per plane.
template <typename T, int V>
__global__ void fwd_nchw_kernel(T* y, const T* x, const T* r, bool relu_on, const float* mean, const float* scale,
                                const float* shift, int64_t C, int64_t HW, int64_t planes) {
  const int64_t hwv = HW / V;
  for (int64_t pl = blockIdx.y; pl < planes; pl += gridDim.y) {
    const int64_t c = pl % C;
    const FwdCoef cf = {mean[c], scale[c], shift[c]};
    for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < hwv; j += int64_t(gridDim.x) * blockDim.x)
      fwd_pack<T, V>(y, x, r, relu_on, &cf, pl * HW + j * V, 0);
  }
}

template <typename T, int V>
__global__ void bwd_nchw_kernel(T* dx, T* dr, const T* dy, const T* relu_y, const T* x, const float* mean,
                                const float* k, const float* c1, const float* c2, int64_t C, int64_t HW,
                                int64_t planes) {
  const int64_t hwv = HW / V;
  for (int64_t pl = blockIdx.y; pl < planes; pl += gridDim.y) {
    const int64_t c = pl % C;
    const BwdCoef cf = {mean[c], k[c], c1[c], c2[c]};
    for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < hwv; j += int64_t(gridDim.x) * blockDim.x)
      bwd_pack<T, V>(dx, dr, dy, relu_y, x, &cf, pl * HW + j * V, 0);
  }
}

// Layout-free elementwise: n / V vectors in a grid-stride loop, then the n % V tail, one value
// per thread of the first threads.
template <typename T, int V>
__global__ void epilogue_kernel(T* y, const T* r, int64_t n) {
  const int64_t nv = n / V, stride = int64_t(gridDim.x) * blockDim.x, first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  for (int64_t i = first; i < nv; i += stride) {
    Pack<T, V> yv = load_pack<V>(y + i * V), rv{};
    if (r) rv = load_pack<V>(r + i * V);
#pragma unroll
    for (int k = 0; k < V; ++k) yv.v[k] = from_f32<T>(relu(to_f32(yv.v[k]) + (r ? to_f32(rv.v[k]) : 0.0f)));
    store_pack<V>(y + i * V, yv);
  }
  if (first < n - nv * V) {
    const int64_t i = nv * V + first;
    y[i] = from_f32<T>(relu(to_f32(y[i]) + (r ? to_f32(r[i]) : 0.0f)));
  }
}

template <typename T, int V>
__global__ void relu_mask_kernel(T* g, const T* dy, const T* y, int64_t n) {
  const int64_t nv = n / V, stride = int64_t(gridDim.x) * blockDim.x, first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  for (int64_t i = first; i < nv; i += stride) {
    const Pack<T, V> dv = load_pack<V>(dy + i * V), yv = load_pack<V>(y + i * V);
    Pack<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) out.v[k] = to_f32(yv.v[k]) > 0.0f ? dv.v[k] : from_f32<T>(0.0f);
    store_pack<V>(g + i * V, out);
  }
  if (first < n - nv * V) {
    const int64_t i = nv * V + first;
    g[i] = to_f32(y[i]) > 0.0f ? dy[i] : from_f32<T>(0.0f);
  }
}

__global__ void coefficients_kernel(float* mean, float* invstd, float* scale, const double* mean64,
                                    const double* invstd64, const float* w, int64_t C) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < C; c += int64_t(gridDim.x) * blockDim.x) {
    mean[c] = static_cast<float>(mean64[c]);
    invstd[c] = static_cast<float>(invstd64[c]);
    scale[c] = static_cast<float>(static_cast<double>(w[c]) * invstd64[c]);
  }
}

bool valid(const BnDims& d) { return d.N >= 0 && d.C >= 0 && d.HW >= 0; }

// The launch shape of an NCHW elementwise kernel: vectors of a plane along x, planes along y.
dim3 nchw_grid(const BnDims& d, int vec) {
  const int64_t hwv = d.HW / vec;
  return dim3(static_cast<unsigned>(std::clamp<int64_t>((hwv + kPlaneThreads - 1) / kPlaneThreads, 1, kMaxPlaneBlocks)),
              static_cast<unsigned>(std::clamp<int64_t>(d.N * d.C, 1, kMaxPlanes)));
}

// Calls launch(std::integral_constant<int, V>) with V = vec (1, 4 or 8): the kernels' widths.
template <typename F>
void with_vec(int vec, F&& launch) {
  if (vec == 1) launch(std::integral_constant<int, 1>{});
  else if (vec == 4) launch(std::integral_constant<int, 4>{});
  else launch(std::integral_constant<int, 8>{});
}

}  // namespace

cudaError_t batchnorm_apply(void* y, const void* x, const void* r, bool relu_on, DType dtype, const float* mean,
                            const float* scale, const float* shift, const BnDims& d, cudaStream_t stream) {
  if (!valid(d)) return cudaErrorInvalidValue;
  const int64_t total = d.N * d.C * d.HW;
  if (total > 0 && (!y || !x || !mean || !scale || !shift)) return cudaErrorInvalidValue;
  return dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (total == 0) return cudaSuccess;
    const bool vec = bn::aligned16(y) && bn::aligned16(x) && bn::aligned16(r);
    const BnReducePlan p = batchnorm_reduce_plan(d, dtype, vec);
    T* yt = static_cast<T*>(y);
    const T* xt = static_cast<const T*>(x);
    const T* rt = static_cast<const T*>(r);
    with_vec(p.vec, [&](auto v) {
      constexpr int V = decltype(v)::value;
      if constexpr (V == 1 || V == bn::kVec<T>) {
        if (d.nhwc)
          DP_LAUNCH(fwd_nhwc_kernel<T, V>, dim3(static_cast<unsigned>(p.tiles), static_cast<unsigned>(p.chunks)),
                    dim3(static_cast<unsigned>(p.block_x), static_cast<unsigned>(p.block_y)), 0, stream)(
              yt, xt, rt, relu_on, mean, scale, shift, d.C, d.N * d.HW, p.chunk_len);
        else
          DP_LAUNCH(fwd_nchw_kernel<T, V>, nchw_grid(d, V), kPlaneThreads, 0, stream)(yt, xt, rt, relu_on, mean, scale,
                                                                                        shift, d.C, d.HW, d.N * d.C);
      }
    });
    DP_RETURN_LAUNCH();
  });
}

cudaError_t batchnorm_backward_apply(void* dx, void* dr, const void* dy, const void* relu_y, const void* x,
                                     DType dtype, const float* mean, const float* k, const float* c1,
                                     const float* c2, const BnDims& d, cudaStream_t stream) {
  if (!valid(d) || (!dx && !dr)) return cudaErrorInvalidValue;
  const int64_t total = d.N * d.C * d.HW;
  if (total > 0 && (!dy || (dx && (!x || !mean || !k || !c1 || !c2)))) return cudaErrorInvalidValue;
  return dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (total == 0) return cudaSuccess;
    const bool vec = bn::aligned16(dx) && bn::aligned16(dr) && bn::aligned16(dy) && bn::aligned16(relu_y) &&
                     bn::aligned16(x);
    const BnReducePlan p = batchnorm_reduce_plan(d, dtype, vec);
    T* dxt = static_cast<T*>(dx);
    T* drt = static_cast<T*>(dr);
    const T* dyt = static_cast<const T*>(dy);
    const T* yt = static_cast<const T*>(relu_y);
    const T* xt = static_cast<const T*>(x);
    with_vec(p.vec, [&](auto v) {
      constexpr int V = decltype(v)::value;
      if constexpr (V == 1 || V == bn::kVec<T>) {
        if (d.nhwc)
          DP_LAUNCH(bwd_nhwc_kernel<T, V>, dim3(static_cast<unsigned>(p.tiles), static_cast<unsigned>(p.chunks)),
                    dim3(static_cast<unsigned>(p.block_x), static_cast<unsigned>(p.block_y)), 0, stream)(
              dxt, drt, dyt, yt, xt, mean, k, c1, c2, d.C, d.N * d.HW, p.chunk_len);
        else
          DP_LAUNCH(bwd_nchw_kernel<T, V>, nchw_grid(d, V), kPlaneThreads, 0, stream)(dxt, drt, dyt, yt, xt, mean, k,
                                                                                        c1, c2, d.C, d.HW, d.N * d.C);
      }
    });
    DP_RETURN_LAUNCH();
  });
}

cudaError_t batchnorm_coefficients(float* mean, float* invstd, float* scale, const double* mean64,
                                   const double* invstd64, const float* w, int64_t C, cudaStream_t stream) {
  if (C < 0 || (C > 0 && (!mean || !invstd || !scale || !mean64 || !invstd64 || !w))) return cudaErrorInvalidValue;
  if (C == 0) return cudaSuccess;
  DP_LAUNCH(coefficients_kernel, grid_1d(C), kThreads, 0, stream)(mean, invstd, scale, mean64, invstd64, w, C);
  DP_RETURN_LAUNCH();
}

cudaError_t batchnorm_epilogue(void* y, const void* r, DType dtype, int64_t n, cudaStream_t stream) {
  if (n < 0 || (n > 0 && !y)) return cudaErrorInvalidValue;
  return dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (n == 0) return cudaSuccess;
    constexpr int V = bn::kVec<T>;
    T* yt = static_cast<T*>(y);
    const T* rt = static_cast<const T*>(r);
    if (bn::aligned16(y) && bn::aligned16(r))
      DP_LAUNCH(epilogue_kernel<T, V>, grid_1d(std::max<int64_t>(n / V, n % V)), kThreads, 0, stream)(yt, rt, n);
    else
      DP_LAUNCH(epilogue_kernel<T, 1>, grid_1d(n), kThreads, 0, stream)(yt, rt, n);
    DP_RETURN_LAUNCH();
  });
}

cudaError_t batchnorm_relu_mask(void* g, const void* dy, const void* y, DType dtype, int64_t n, cudaStream_t stream) {
  if (n < 0 || (n > 0 && (!g || !dy || !y))) return cudaErrorInvalidValue;
  return dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (n == 0) return cudaSuccess;
    constexpr int V = bn::kVec<T>;
    T* gt = static_cast<T*>(g);
    const T* dyt = static_cast<const T*>(dy);
    const T* yt = static_cast<const T*>(y);
    if (bn::aligned16(g) && bn::aligned16(dy) && bn::aligned16(y))
      DP_LAUNCH(relu_mask_kernel<T, V>, grid_1d(std::max<int64_t>(n / V, n % V)), kThreads, 0, stream)(gt, dyt, yt, n);
    else
      DP_LAUNCH(relu_mask_kernel<T, 1>, grid_1d(n), kThreads, 0, stream)(gt, dyt, yt, n);
    DP_RETURN_LAUNCH();
  });
}

}  // namespace dp::kernels::cuda
