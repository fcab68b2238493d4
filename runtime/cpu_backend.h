// defines: CpuBackend (train.cpu_backend), which kernels the CPU path runs, and CpuConvAlgorithm
// (train.cpu_conv_algorithm), which algorithm oneDNN's convolutions use; their name tables.
//
// OneDnn: convolution, batch norm, pooling and inner product on oneDNN (Debian's libdnnl, the
// library PyTorch's CPU convolutions use), with 4-D activations kept channels last between
// layers, and ReLUs folded into their producers. Reference: the project's own im2col + BLAS
// kernels (the twins the tests compare against), NCHW, unfused. Either is deterministic for a
// seed and a thread count; only Reference is also bitwise the same for any thread count.
#pragma once
#include <span>

#include "runtime/enum_names.h"

namespace dp {

enum class CpuBackend { OneDnn, Reference };

inline constexpr EnumName<CpuBackend> kCpuBackendNames[] = {{CpuBackend::OneDnn, "onednn"},
                                                             {CpuBackend::Reference, "reference"}};
constexpr std::span<const EnumName<CpuBackend>> enum_names(CpuBackend) { return kCpuBackendNames; }

// Auto: Winograd F(4x4, 3x3) (oneDNN's jit_wino_4x3) for the convolutions where it is about twice
// as fast as the direct one on AVX-512 (3x3, stride 1, no groups, 64 or more input and output
// channels, multiples of 16), the direct algorithm elsewhere; its results differ from the direct
// one's in the last bits (relative 2e-6 here) and are deterministic for a thread count like
// it. Direct: oneDNN's direct convolution everywhere. Only under CpuBackend::OneDnn.
enum class CpuConvAlgorithm { Auto, Direct };

inline constexpr EnumName<CpuConvAlgorithm> kCpuConvAlgorithmNames[] = {{CpuConvAlgorithm::Auto, "auto"},
                                                                         {CpuConvAlgorithm::Direct, "direct"}};
constexpr std::span<const EnumName<CpuConvAlgorithm>> enum_names(CpuConvAlgorithm) { return kCpuConvAlgorithmNames; }

}  // namespace dp
