#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/augment.h"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/launch.cuh"

namespace dp::kernels::cuda {
namespace {

// The cast of the f32 result to the compute dtype (round to nearest even, as cast.cu).
struct ToF32 {
  using T = float;
  static __device__ __forceinline__ float from(float v) { return v; }
};
struct ToBF16 {
  using T = uint16_t;
  static __device__ __forceinline__ uint16_t from(float v) { return __bfloat16_as_ushort(__float2bfloat16_rn(v)); }
};
struct ToF16 {
  using T = uint16_t;
  static __device__ __forceinline__ uint16_t from(float v) { return __half_as_ushort(__float2half_rn(v)); }
};

// One thread per output element, in storage order (coalesced writes; the gathered reads of the
// raw batch, a quarter of the bytes for u8, mostly hit L2).
template <typename In, typename To, bool kNhwc>
__global__ void augment_kernel(typename To::T* out, const In* in, AugmentDims d, const int32_t* choices,
                               int crop_padding, const float* mean, const float* std, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const AugmentPixel p = augment_pixel_of(i, d, kNhwc);
    out[i] = To::from(augment_value(in, d, p, choices + 3 * p.b, crop_padding, mean, std));
  }
}

template <typename In, typename To>
void launch(void* out, bool nhwc, const void* in, const AugmentDims& d, const int32_t* choices, int pad,
            const float* mean, const float* std, int64_t n, cudaStream_t stream) {
  auto* o = static_cast<typename To::T*>(out);
  const auto* x = static_cast<const In*>(in);
  if (nhwc)
    DP_LAUNCH(augment_kernel<In, To, true>, grid_1d(n), kThreads, 0, stream)(o, x, d, choices, pad, mean, std, n);
  else
    DP_LAUNCH(augment_kernel<In, To, false>, grid_1d(n), kThreads, 0, stream)(o, x, d, choices, pad, mean, std, n);
}

template <typename In>
void launch_in(void* out, AugmentOut out_type, bool nhwc, const void* in, const AugmentDims& d,
               const int32_t* choices, int pad, const float* mean, const float* std, int64_t n, cudaStream_t stream) {
  switch (out_type) {
    case AugmentOut::F32: launch<In, ToF32>(out, nhwc, in, d, choices, pad, mean, std, n, stream); break;
    case AugmentOut::BF16: launch<In, ToBF16>(out, nhwc, in, d, choices, pad, mean, std, n, stream); break;
    case AugmentOut::F16: launch<In, ToF16>(out, nhwc, in, d, choices, pad, mean, std, n, stream); break;
  }
}

}  // namespace

cudaError_t augment_batch(void* out, AugmentOut out_type, bool channels_last, const void* in, AugmentIn in_type,
                          AugmentDims dims, const int32_t* choices, int crop_padding, const float* mean,
                          const float* std, cudaStream_t stream) {
  if (dims.batch < 0 || dims.channels < 1 || dims.height < 1 || dims.width < 1 || crop_padding < 0)
    return cudaErrorInvalidValue;
  if (out_type != AugmentOut::F32 && out_type != AugmentOut::BF16 && out_type != AugmentOut::F16)
    return cudaErrorInvalidValue;
  if (in_type != AugmentIn::U8 && in_type != AugmentIn::F32) return cudaErrorInvalidValue;
  if ((mean == nullptr) != (std == nullptr)) return cudaErrorInvalidValue;
  if (dims.batch == 0) return cudaSuccess;
  if (out == nullptr || in == nullptr || choices == nullptr || out == in) return cudaErrorInvalidValue;
  const int64_t n = dims.batch * dims.channels * dims.height * dims.width;
  if (in_type == AugmentIn::U8)
    launch_in<uint8_t>(out, out_type, channels_last, in, dims, choices, crop_padding, mean, std, n, stream);
  else
    launch_in<float>(out, out_type, channels_last, in, dims, choices, crop_padding, mean, std, n, stream);
  DP_RETURN_LAUNCH();
}

}  // namespace dp::kernels::cuda
