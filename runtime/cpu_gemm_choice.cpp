#include "runtime/cpu_gemm_choice.h"

#include "base/error.h"
#include "kernels/cpu/isa.h"
#include "runtime/tunables.h"

namespace dp {

const kernels::cpu::MklStatus& process_mkl() {
  static const kernels::cpu::MklStatus& s = kernels::cpu::mkl_load(tunables().text(Tunable::MklDir));
  return s;
}

CpuGemm cpu_gemm_library(CpuGemm requested, bool onednn_avx512, const kernels::cpu::MklStatus& mkl) {
  if (requested == CpuGemm::Mkl && !mkl.loaded)
    DP_THROW_USER(
        "train.cpu_gemm = \"mkl\", but MKL is not available: {} could not be loaded ({}). tools/setup.sh fetches the "
        "pinned MKL (PyPI's mkl wheel) into /opt/dptrain-deps/mkl-<version>/lib; DPTRAIN_MKL_DIR names another "
        "folder holding libmkl_rt.so.3; or use train.cpu_gemm = \"auto\" (oneDNN or OpenBLAS without MKL)",
        mkl.library, mkl.error);
  return resolved_cpu_gemm(requested, onednn_avx512, mkl.loaded && mkl.own_kernels);
}

CpuGemm cpu_gemm_library(CpuGemm requested) {
  static const kernels::cpu::MklStatus kNotAsked;
  const bool wants_mkl = requested == CpuGemm::Auto || requested == CpuGemm::Mkl;
  return cpu_gemm_library(requested, kernels::cpu::onednn_has_avx512_core(), wants_mkl ? process_mkl() : kNotAsked);
}

namespace {

// "Intel(R) oneAPI Math Kernel Library Version 2026.2-Product Build ..." -> "oneMKL 2026.2".
std::string short_version(const std::string& v) {
  const size_t at = v.find("Version ");
  if (at == std::string::npos) return v;
  const size_t from = at + 8, to = v.find_first_of("- ", from);
  return "oneMKL " + v.substr(from, to == std::string::npos ? std::string::npos : to - from);
}

}  // namespace

std::string cpu_gemm_words(CpuGemm resolved) {
  switch (resolved) {
    case CpuGemm::Onednn: return "oneDNN matmul";
    case CpuGemm::Openblas: return "OpenBLAS";
    case CpuGemm::Mkl: return "MKL sgemm (" + short_version(process_mkl().version) + ")";
    case CpuGemm::Auto: break;
  }
  return "auto";
}

}  // namespace dp
