// defines: Precision (train.precision), the compute precision of a run, and Tf32 (train.tf32),
// where f32 data may use TF32 tensor cores on a GPU; their name tables and what Tf32 allows.
// What Precision means on a GPU (the activations' dtype, channels-last layout, loss scaling) is
// launch/gpu_run.h's; the CPU computes in fp32 only.
#pragma once
#include <span>

#include "runtime/enum_names.h"

namespace dp {

enum class Precision { Fp32, Bf16, Fp16 };

inline constexpr EnumName<Precision> kPrecisionNames[] = {
    {Precision::Fp32, "fp32"}, {Precision::Bf16, "bf16"}, {Precision::Fp16, "fp16"}};
constexpr std::span<const EnumName<Precision>> enum_names(Precision) { return kPrecisionNames; }

// f32 data on a GPU (train.precision = "fp32"): TF32 tensor cores round each product's inputs to
// 10 mantissa bits (f32 accumulation), ~8x the FMA throughput. PyTorch's two switches as one:
// Off: neither (cuDNN CUDNN_FMA_MATH, cuBLASLt CUBLAS_COMPUTE_32F; results within ~1e-5 of the
// CPU); Conv: convolutions only (torch.backends.cudnn.allow_tf32 = True, its default, with
// torch.backends.cuda.matmul.allow_tf32 = False, its default since 1.12); All: convolutions and
// matmuls (CUBLAS_COMPUTE_32F_FAST_TF32). 16-bit data ignores it (tensor cores either way).
enum class Tf32 { Off, Conv, All };

inline constexpr EnumName<Tf32> kTf32Names[] = {{Tf32::Off, "off"}, {Tf32::Conv, "conv"}, {Tf32::All, "all"}};
constexpr std::span<const EnumName<Tf32>> enum_names(Tf32) { return kTf32Names; }

constexpr bool tf32_in_convolutions(Tf32 t) { return t != Tf32::Off; }
constexpr bool tf32_in_matmuls(Tf32 t) { return t == Tf32::All; }

}  // namespace dp
