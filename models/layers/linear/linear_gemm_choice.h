// defines: linear_gemm, the library a linear product runs on under train.cpu_gemm on this CPU
// (runtime/cpu_backend.h's resolved_cpu_gemm, with oneDNN's effective ISA: kernels/cpu/isa.h).
#pragma once
#include "kernels/cpu/isa.h"
#include "kernels/cpu/onednn_matmul.h"
#include "runtime/cpu_backend.h"

namespace dp::models {

inline kernels::cpu::onednn::GemmLibrary linear_gemm(CpuGemm g) {
  using L = kernels::cpu::onednn::GemmLibrary;
  return resolved_cpu_gemm(g, kernels::cpu::onednn_has_avx512_core()) == CpuGemm::Onednn ? L::Onednn : L::Openblas;
}

}  // namespace dp::models
