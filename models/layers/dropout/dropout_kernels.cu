#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/convert.cuh"
#include "kernels/cuda/dispatch.cuh"
#include "models/layers/dropout/dropout_kernels.h"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/layout.h"
#include "base/philox.h"
#include "kernels/cuda/dropout_keep.h"

namespace dp::kernels::cuda {
namespace {

// Element I/O (convert.cuh): a 16-bit element widened to f32, an f32 rounded to nearest even.
template <typename T>
__device__ __forceinline__ void store(T* p, float v) { *p = from_f32<T>(v); }

// Where logical element i lies in memory: i itself (any contiguous layout read in its own
// order), or its NHWC offset.
struct Contiguous {
  __device__ int64_t operator()(int64_t i) const { return i; }
};
struct Nhwc {
  int64_t C, H, W;
  __device__ int64_t operator()(int64_t i) const { return nhwc_offset(i, C, H, W); }
};

// One thread per Philox block (4 consecutive logical elements), as the CPU twin's loop body.
template <typename T, typename Map>
__global__ void dropout_kernel(T* out, const T* in, int64_t n, uint32_t threshold, float scale, uint64_t seed,
                               uint64_t stream_id, Map at) {
  const int64_t blocks = (n + 3) / 4;
  for (int64_t blk = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; blk < blocks;
       blk += int64_t(gridDim.x) * blockDim.x) {
    uint32_t r[4];
    Philox::block(seed, static_cast<uint64_t>(blk), stream_id, r);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t i = blk * 4 + j;
      if (i < n) {
        const int64_t m = at(i);
        store(out + m, dropout_keep(r[j], threshold) ? fp::mul(to_f32(in[m]), scale) : 0.0f);
      }
    }
  }
}

template <typename T, typename Map>
cudaError_t apply_mask(T* out, const T* in, int64_t n, double p, uint64_t seed, uint64_t stream_id, Map at,
                       cudaStream_t stream) {
  if (n < 0 || !(p >= 0 && p < 1)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const float scale = static_cast<float>(1.0 / (1.0 - p));  // as the CPU twin: in double, then rounded
  DP_LAUNCH(dropout_kernel<T, Map>, grid_1d((n + 3) / 4), kThreads, 0, stream)(
      out, in, n, dropout_keep_threshold(p), scale, seed, stream_id, at);
  DP_RETURN_LAUNCH();
}

template <typename Map>
cudaError_t apply_mask(DType dtype, void* out, const void* in, int64_t n, double p, uint64_t seed, uint64_t stream_id,
                       Map at, cudaStream_t stream) {
  return dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    return apply_mask(static_cast<T*>(out), static_cast<const T*>(in), n, p, seed, stream_id, at, stream);
  });
}

cudaError_t apply_mask_nhwc(DType dtype, void* out, const void* in, int64_t N, int64_t C, int64_t H, int64_t W,
                            double p, uint64_t seed, uint64_t stream_id, cudaStream_t stream) {
  if (N < 0 || C < 0 || H < 0 || W < 0) return cudaErrorInvalidValue;
  const int64_t n = N * C * H * W;
  if (n == 0) return apply_mask(dtype, out, in, 0, p, seed, stream_id, Contiguous{}, stream);  // checks p, dtype
  return apply_mask(dtype, out, in, n, p, seed, stream_id, Nhwc{C, H, W}, stream);
}

}  // namespace

cudaError_t dropout_forward(float* y, const float* x, int64_t n, double p, uint64_t seed, uint64_t stream_id,
                            cudaStream_t stream) {
  return apply_mask(y, x, n, p, seed, stream_id, Contiguous{}, stream);
}

cudaError_t dropout_backward(float* dx, const float* dy, int64_t n, double p, uint64_t seed, uint64_t stream_id,
                             cudaStream_t stream) {
  return apply_mask(dx, dy, n, p, seed, stream_id, Contiguous{}, stream);
}

cudaError_t dropout_forward(DType dtype, void* y, const void* x, int64_t n, double p, uint64_t seed,
                            uint64_t stream_id, cudaStream_t stream) {
  return apply_mask(dtype, y, x, n, p, seed, stream_id, Contiguous{}, stream);
}

cudaError_t dropout_backward(DType dtype, void* dx, const void* dy, int64_t n, double p, uint64_t seed,
                             uint64_t stream_id, cudaStream_t stream) {
  return apply_mask(dtype, dx, dy, n, p, seed, stream_id, Contiguous{}, stream);
}

cudaError_t dropout_forward_nhwc(DType dtype, void* y, const void* x, int64_t N, int64_t C, int64_t H, int64_t W,
                                 double p, uint64_t seed, uint64_t stream_id, cudaStream_t stream) {
  return apply_mask_nhwc(dtype, y, x, N, C, H, W, p, seed, stream_id, stream);
}

cudaError_t dropout_backward_nhwc(DType dtype, void* dx, const void* dy, int64_t N, int64_t C, int64_t H, int64_t W,
                                  double p, uint64_t seed, uint64_t stream_id, cudaStream_t stream) {
  return apply_mask_nhwc(dtype, dx, dy, N, C, H, W, p, seed, stream_id, stream);
}

}  // namespace dp::kernels::cuda
