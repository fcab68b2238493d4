// defines: to_f32 and from_f32<T>, the element conversions of the kernels templated on their
// data type (f32, __nv_bfloat16, __half): 16-bit values are widened exactly and rounded back to
// nearest even. Device code only (.cu files).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace dp::kernels::cuda {

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }

template <typename T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) { return __float2half_rn(v); }

}  // namespace dp::kernels::cuda
