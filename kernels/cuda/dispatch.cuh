// defines: dispatch_float, the one switch from a floating DType to the element type a kernel is
// instantiated for (f32 -> float, bf16 -> __nv_bfloat16, f16 -> __half). Device code only
// (.cu files): the kernels templated on their element type launch through it.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "base/dtype.h"

namespace dp::kernels::cuda {

// Returns fn(T{}) for dtype's element type T (fn returns the launch status); any other dtype is
// cudaErrorInvalidValue, without calling fn.
//   return dispatch_float(dtype, [&](auto tag) { using T = decltype(tag); ...; DP_RETURN_LAUNCH(); });
template <typename Fn>
cudaError_t dispatch_float(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::F32: return fn(float{});
    case DType::BF16: return fn(__nv_bfloat16{});
    case DType::F16: return fn(__half{});
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace dp::kernels::cuda
