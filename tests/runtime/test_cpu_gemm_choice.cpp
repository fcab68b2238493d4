// runtime/cpu_gemm_choice.h and cpu_backend.h's resolved_cpu_gemm: what train.cpu_gemm runs on
// (auto: MKL where it is present and runs its own kernels, an Intel CPU, else oneDNN's matmul on
// AVX-512, else OpenBLAS; the explicit choices stand), and "mkl" without MKL is a UserError that
// says what is missing and how to get it.
#include <gtest/gtest.h>

#include "base/error.h"
#include "runtime/cpu_gemm_choice.h"

namespace dp {
namespace {

TEST(CpuGemmChoice, AutoTakesMklWhereItRunsItsOwnKernelsElseOnednnOnAvx512ElseOpenblas) {
  for (bool avx512 : {true, false}) EXPECT_EQ(resolved_cpu_gemm(CpuGemm::Auto, avx512, true), CpuGemm::Mkl);
  EXPECT_EQ(resolved_cpu_gemm(CpuGemm::Auto, true, false), CpuGemm::Onednn);
  EXPECT_EQ(resolved_cpu_gemm(CpuGemm::Auto, false, false), CpuGemm::Openblas);
  for (bool avx512 : {true, false})
    for (bool mkl : {true, false})
      for (CpuGemm g : {CpuGemm::Onednn, CpuGemm::Openblas, CpuGemm::Mkl})
        EXPECT_EQ(resolved_cpu_gemm(g, avx512, mkl), g) << enum_name(g) << " stands";
}

TEST(CpuGemmChoice, MklWithoutMklIsAClearErrorAndAutoFallsBack) {
  kernels::cpu::MklStatus absent;
  absent.library = "/nowhere/libmkl_rt.so.3";
  absent.error = "/nowhere/libmkl_rt.so.3: cannot open shared object file: No such file or directory";
  try {
    cpu_gemm_library(CpuGemm::Mkl, true, absent);
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(),
                 "train.cpu_gemm = \"mkl\", but MKL is not available: /nowhere/libmkl_rt.so.3 could not be loaded "
                 "(/nowhere/libmkl_rt.so.3: cannot open shared object file: No such file or directory). "
                 "tools/setup.sh fetches the pinned MKL (PyPI's mkl wheel) into /opt/dptrain-deps/mkl-<version>/lib; "
                 "DPTRAIN_MKL_DIR names another folder holding libmkl_rt.so.3; or use train.cpu_gemm = \"auto\" "
                 "(oneDNN or OpenBLAS without MKL)");
  }
  EXPECT_EQ(cpu_gemm_library(CpuGemm::Auto, true, absent), CpuGemm::Onednn);
  EXPECT_EQ(cpu_gemm_library(CpuGemm::Auto, false, absent), CpuGemm::Openblas);
  kernels::cpu::MklStatus present;
  present.loaded = true;
  // Loaded on AMD (its generic kernels, slower here): auto keeps oneDNN / OpenBLAS; "mkl" runs it.
  EXPECT_EQ(cpu_gemm_library(CpuGemm::Mkl, false, present), CpuGemm::Mkl);
  EXPECT_EQ(cpu_gemm_library(CpuGemm::Auto, true, present), CpuGemm::Onednn);
  EXPECT_EQ(cpu_gemm_library(CpuGemm::Auto, false, present), CpuGemm::Openblas);
  present.own_kernels = true;  // an Intel CPU
  EXPECT_EQ(cpu_gemm_library(CpuGemm::Auto, true, present), CpuGemm::Mkl);
  EXPECT_EQ(cpu_gemm_library(CpuGemm::Auto, false, present), CpuGemm::Mkl);
  EXPECT_EQ(cpu_gemm_library(CpuGemm::Openblas, true, present), CpuGemm::Openblas);
}

TEST(CpuGemmChoice, TheLogNamesTheLibrary) {
  EXPECT_EQ(cpu_gemm_words(CpuGemm::Onednn), "oneDNN matmul");
  EXPECT_EQ(cpu_gemm_words(CpuGemm::Openblas), "OpenBLAS");
  if (process_mkl().loaded) {
    EXPECT_EQ(cpu_gemm_words(CpuGemm::Mkl).rfind("MKL sgemm (oneMKL 20", 0), 0u) << cpu_gemm_words(CpuGemm::Mkl);
    EXPECT_NE(process_mkl().version.find("Math Kernel Library"), std::string::npos) << process_mkl().version;
  }
}

}  // namespace
}  // namespace dp
