// kernels/cpu/mkl_gemm.h: MKL's sgemm, loaded at run time (skipped, saying so, without MKL): every
// transpose combination the linear layers use equals an f64 product within f32 rounding; the same
// call twice on the same threads gives the same bits (GPT's shapes); MKL runs on its GNU threading
// layer in the process's one libgomp pool (no libiomp5 mapped), and the process's cblas_sgemm is
// still OpenBLAS's (MKL was loaded RTLD_LOCAL).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "base/rng.h"
#include "kernels/cpu/mkl_gemm.h"
#include "tests/mkl_test.h"

namespace dp::kernels::cpu {
namespace {

std::vector<float> random_floats(int64_t n, uint64_t seed) {
  Rng rng(seed, 0);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<float>(rng.normal());
  return v;
}

// C (M, N) = op(A) op(B) in f64, row-major.
std::vector<double> reference(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const std::vector<float>& A,
                              const std::vector<float>& B) {
  std::vector<double> C(static_cast<size_t>(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) {
      const double a = ta ? A[k * M + i] : A[i * K + k];
      for (int64_t j = 0; j < N; ++j) C[i * N + j] += a * (tb ? B[j * K + k] : B[k * N + j]);
    }
  return C;
}

TEST(MklGemm, EveryLinearTransposeEqualsTheF64Product) {
  DP_SKIP_WITHOUT_MKL();
  const int64_t M = 200, N = 96, K = 130;
  // forward x W^T (N, T), backward data dy W (N, N), weight gradient dy^T x (T, N), and (T, T).
  for (auto [ta, tb] : {std::pair{false, true}, {false, false}, {true, false}, {true, true}}) {
    const auto A = random_floats(M * K, 1), B = random_floats(K * N, 2);
    std::vector<float> C(static_cast<size_t>(M * N), 0.5f);
    mkl_gemm(ta, tb, M, N, K, 1.0f, A.data(), ta ? M : K, B.data(), tb ? K : N, 0.0f, C.data(), N);
    const auto ref = reference(ta, tb, M, N, K, A, B);
    double err = 0, mag = 0;
    for (size_t i = 0; i < C.size(); ++i) {
      err = std::max(err, std::abs(C[i] - ref[i]));
      mag = std::max(mag, std::abs(ref[i]));
    }
    EXPECT_LT(err / mag, 1e-5) << "ta " << ta << " tb " << tb;
    EXPECT_GT(mag, 1.0);
  }
  // beta = 1 accumulates (the weight gradient's +=).
  const auto A = random_floats(8 * 4, 3), B = random_floats(4 * 5, 4);
  std::vector<float> C(40, 1.0f);
  mkl_gemm(false, false, 8, 5, 4, 1.0f, A.data(), 4, B.data(), 5, 1.0f, C.data(), 5);
  const auto ref = reference(false, false, 8, 5, 4, A, B);
  for (size_t i = 0; i < C.size(); ++i) EXPECT_NEAR(C[i], ref[i] + 1.0, 1e-5) << i;
}

TEST(MklGemm, TheSameCallOnTheSameThreadsRepeatsBitForBit) {
  DP_SKIP_WITHOUT_MKL();
  const int saved = omp_get_max_threads();
  omp_set_num_threads(2);
  // GPT's c_attn forward and weight gradient at nanoGPT's shakespeare-char size (M = 16 x 256).
  const int64_t M = 4096, I = 384, O = 1152;
  const auto x = random_floats(M * I, 5), w = random_floats(O * I, 6), dy = random_floats(M * O, 7);
  auto run = [&] {
    std::vector<float> y(static_cast<size_t>(M * O)), dw(static_cast<size_t>(O * I), 0.0f);
    mkl_gemm(false, true, M, O, I, 1.0f, x.data(), I, w.data(), I, 0.0f, y.data(), O);
    mkl_gemm(true, false, O, I, M, 1.0f, dy.data(), O, x.data(), I, 1.0f, dw.data(), I);
    y.insert(y.end(), dw.begin(), dw.end());
    return y;
  };
  const auto a = run(), b = run();
  omp_set_num_threads(saved);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

TEST(MklGemm, SharesTheOneOpenMpPoolAndLeavesOpenblasTheProcessCblas) {
  DP_SKIP_WITHOUT_MKL();
  const auto A = random_floats(64 * 64, 8);
  std::vector<float> C(64 * 64);
  mkl_gemm(false, false, 64, 64, 64, 1.0f, A.data(), 64, A.data(), 64, 0.0f, C.data(), 64);  // MKL has run
  std::ifstream maps("/proc/self/maps");
  bool gnu_thread = false, gomp = false, iomp = false;
  for (std::string line; std::getline(maps, line);) {
    gnu_thread |= line.find("libmkl_gnu_thread.so") != std::string::npos;
    gomp |= line.find("libgomp.so") != std::string::npos;
    iomp |= line.find("libiomp5") != std::string::npos || line.find("libmkl_intel_thread") != std::string::npos;
  }
  EXPECT_TRUE(gnu_thread) << "MKL's GNU threading layer is not mapped";
  EXPECT_TRUE(gomp);
  EXPECT_FALSE(iomp) << "Intel's OpenMP runtime (a second thread pool) is mapped";
  Dl_info info{};
  void* sgemm = ::dlsym(RTLD_DEFAULT, "cblas_sgemm");
  ASSERT_NE(sgemm, nullptr);
  ASSERT_NE(::dladdr(sgemm, &info), 0);
  EXPECT_NE(std::string(info.dli_fname).find("openblas"), std::string::npos) << info.dli_fname;
}

}  // namespace
}  // namespace dp::kernels::cpu
