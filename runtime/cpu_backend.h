// defines: CpuBackend (train.cpu_backend), which kernels the CPU path runs, and its name table.
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

}  // namespace dp
