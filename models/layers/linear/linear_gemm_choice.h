// defines: linear_gemm, the library a linear product runs on under train.cpu_gemm on this CPU
// (runtime/cpu_backend.h's resolved_cpu_gemm, with oneDNN's effective ISA, kernels/cpu/isa.h, and
// whether MKL is loaded with its own kernels, kernels/cpu/mkl_gemm.h), or oneDNN's bf16 matmul. A graph's layers get train.cpu_gemm resolved
// already (runtime/cpu_gemm_choice.h, which loads MKL); Auto here serves layers run on their own.
#pragma once
#include "kernels/cpu/isa.h"
#include "kernels/cpu/mkl_gemm.h"
#include "kernels/cpu/onednn_matmul.h"
#include "runtime/cpu_backend.h"
#include "runtime/layer.h"

namespace dp::models {

inline kernels::cpu::onednn::GemmLibrary linear_gemm(CpuGemm g) {
  using L = kernels::cpu::onednn::GemmLibrary;
  switch (resolved_cpu_gemm(g, kernels::cpu::onednn_has_avx512_core(), kernels::cpu::mkl_fast())) {
    case CpuGemm::Onednn: return L::Onednn;
    case CpuGemm::Mkl: return L::Mkl;
    default: return L::Openblas;
  }
}

// A call's library: oneDNN's bf16 matmul under train.precision = "bf16" on the CPU, else the above.
inline kernels::cpu::onednn::GemmLibrary linear_gemm(const StepContext& ctx) {
  return ctx.cpu_matmul_bf16 ? kernels::cpu::onednn::GemmLibrary::OnednnBf16 : linear_gemm(ctx.cpu_gemm);
}

}  // namespace dp::models
