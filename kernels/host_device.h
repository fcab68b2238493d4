// defines: fp::{add, sub, mul, div, sqrt, fma}, one IEEE single-precision operation each, rounded
// to nearest even, for DP_HD functions (base/host_device.h: built by nvcc's device pass and any
// host compiler). (A host loop over fp::fma gets an FMA-instruction clone from DP_FMA_CLONES,
// kernels/cpu/isa.h.)
//
// Why: nvcc contracts a * b + c into one fused multiply-add by default (--fmad=true), which
// changes the bits; the CPU kernels (kernels/cpu/) fix their order of operations to match
// PyTorch. The device pass uses the _rn intrinsics, which are never contracted; the host pass
// uses the plain operators, so the element functions built on these (optim_math.h, augment.h)
// run in the CPU kernels and can be compared with the device's bit for bit by an ordinary host
// test, without a GPU. A host source that calls them must not let the compiler contract either:
// GCC does by default (-ffp-contract=fast), so such sources are built with -ffp-contract=off
// (kernels/CMakeLists.txt).
#pragma once
#include <cmath>
#include <cstdint>

#include "base/host_device.h"

namespace dp::kernels::fp {

#if defined(__CUDA_ARCH__)
DP_HD float add(float a, float b) { return __fadd_rn(a, b); }
DP_HD float sub(float a, float b) { return __fsub_rn(a, b); }
DP_HD float mul(float a, float b) { return __fmul_rn(a, b); }
DP_HD float div(float a, float b) { return __fdiv_rn(a, b); }
DP_HD float sqrt(float a) { return __fsqrt_rn(a); }
DP_HD float fma(float a, float b, float c) { return __fmaf_rn(a, b, c); }
#else
DP_HD float add(float a, float b) { return a + b; }
DP_HD float sub(float a, float b) { return a - b; }
DP_HD float mul(float a, float b) { return a * b; }
DP_HD float div(float a, float b) { return a / b; }
DP_HD float sqrt(float a) { return std::sqrt(a); }
DP_HD float fma(float a, float b, float c) { return std::fma(a, b, c); }
#endif

}  // namespace dp::kernels::fp
