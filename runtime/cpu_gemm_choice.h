// defines: cpu_gemm_library, train.cpu_gemm resolved on this machine (never Auto; "mkl" without MKL
// is a UserError saying what is missing and how to get it), process_mkl, this process's MKL (loaded
// once from DPTRAIN_MKL_DIR), and cpu_gemm_words, the library's name for the CPU-kernels log line.
#pragma once
#include <string>

#include "kernels/cpu/mkl_gemm.h"
#include "runtime/cpu_backend.h"

namespace dp {

// Loads MKL from the tunable DPTRAIN_MKL_DIR on the first call (kernels/cpu/mkl_gemm.h's mkl_load).
const kernels::cpu::MklStatus& process_mkl();

// `requested` on a CPU where oneDNN does (not) run on AVX-512, with `mkl` as loaded (or not):
// resolved_cpu_gemm (auto: MKL where it loaded and runs its own kernels), after refusing Mkl without
// MKL (UserError naming the library looked for, why it did not load, and tools/setup.sh).
CpuGemm cpu_gemm_library(CpuGemm requested, bool onednn_avx512, const kernels::cpu::MklStatus& mkl);
// This process: loads MKL (process_mkl) unless `requested` names another library.
CpuGemm cpu_gemm_library(CpuGemm requested);

// "oneDNN matmul", "OpenBLAS", "MKL sgemm (oneMKL 2026.2)": the resolved library in the log's words.
std::string cpu_gemm_words(CpuGemm resolved);

}  // namespace dp
