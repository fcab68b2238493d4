// defines: CpuBackend (train.cpu_backend), which kernels the CPU path runs, CpuConvAlgorithm
// (train.cpu_conv_algorithm), which algorithm oneDNN's convolutions use, and CpuGemm
// (train.cpu_gemm), which library the linear layers' products run on; their name tables.
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

// The GEMMs of the linear layers and the attention's projections under OneDnn (forward and both
// backward products). Auto: MKL's sgemm where MKL is present and runs its own kernels (an Intel CPU;
// loaded from DPTRAIN_MKL_DIR: kernels/cpu/mkl_gemm.h; on AMD it runs a generic path, measured
// slower than both others on every GPT product: docs/cpu-performance.md), else oneDNN's matmul
// where oneDNN runs it on AVX-512 (its brgemm kernels, scratchpad ours: nothing allocated per call),
// OpenBLAS's sgemm elsewhere: without AVX-512, Debian's oneDNN 2.6.3 runs f32 matmul on its GEMM
// fallback (gemm:jit), which allocates a workspace on every call (a step then asks the heap for a
// buffer per product: tests/models/test_step_allocations.cpp) and whose AVX2 kernel moves the stack
// pointer into that workspace while it runs (why signals are taken by a thread of their own:
// launch/signal_thread.h); OpenBLAS keeps its buffers in a pool. Onednn, Openblas, Mkl: that library
// everywhere (Mkl without MKL present: a UserError, runtime/cpu_gemm_choice.h). Each is
// deterministic for a thread count.
enum class CpuGemm { Auto, Onednn, Openblas, Mkl };

inline constexpr EnumName<CpuGemm> kCpuGemmNames[] = {
    {CpuGemm::Auto, "auto"}, {CpuGemm::Onednn, "onednn"}, {CpuGemm::Openblas, "openblas"}, {CpuGemm::Mkl, "mkl"}};
constexpr std::span<const EnumName<CpuGemm>> enum_names(CpuGemm) { return kCpuGemmNames; }

// The library `g` means on a CPU where oneDNN does (or does not) run on AVX-512 and MKL is (or is
// not) loaded with its own kernels (mkl_fast: MklStatus::own_kernels): Onednn, Openblas or Mkl,
// never Auto (pure). An explicit choice stays as it is (Mkl without MKL is refused before it gets
// here).
constexpr CpuGemm resolved_cpu_gemm(CpuGemm g, bool onednn_avx512, bool mkl_fast) {
  if (g != CpuGemm::Auto) return g;
  if (mkl_fast) return CpuGemm::Mkl;
  return onednn_avx512 ? CpuGemm::Onednn : CpuGemm::Openblas;
}

}  // namespace dp
