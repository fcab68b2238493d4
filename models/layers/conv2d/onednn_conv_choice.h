// defines: onednn_winograd_fits (pure), which convolutions run on oneDNN's Winograd algorithm
// under train.cpu_conv_algorithm = "auto" (runtime/cpu_backend.h).
//
// oneDNN's f32 Winograd (jit_wino_4x3, AVX-512) computes 3x3 stride-1 convolutions without
// groups; measured against its direct kernels on this project's CPU (fwd / bwd-data / bwd-weights,
// 1 and 2 threads), it takes about half the time from 64 channels up (ResNet's 3x3 layers) and
// loses below 64 (the Fashion-MNIST CNN's 32 -> 64 layer: bwd-weights 1.4x slower). Its blocked
// kernels need channels in multiples of 16, and AVX-512 (Debian's 2.6.3 has no AVX2 Winograd): on a
// CPU without it (or under ONEDNN_MAX_CPU_ISA=AVX2) auto is the direct algorithm everywhere.
#pragma once
#include "models/layers/conv2d/conv2d_ref.h"
#include "runtime/cpu_backend.h"

namespace dp::models {

constexpr bool onednn_winograd_fits(const kernels::cpu::Conv2dDims& d, CpuConvAlgorithm a, bool onednn_avx512) {
  return a == CpuConvAlgorithm::Auto && onednn_avx512 && d.K == 3 && d.stride == 1 && d.groups == 1 && d.C >= 64 && d.OC >= 64 &&
         d.C % 16 == 0 && d.OC % 16 == 0;
}

}  // namespace dp::models
