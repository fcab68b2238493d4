#include "kernels/cpu/mkl_gemm.h"

#include <cpuid.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <optional>

#include "base/dynlib.h"
#include "base/error.h"

namespace dp::kernels::cpu {

namespace {

// MKL's own declarations (mkl_cblas.h, mkl_service.h, oneMKL 2026.2), so that the build needs no
// MKL headers: CBLAS's enum values are the standard ones.
constexpr int kCblasRowMajor = 101, kCblasNoTrans = 111, kCblasTrans = 112;
constexpr int kMklThreadingGnu = 3;  // MKL_THREADING_GNU
using SgemmFn = void (*)(int layout, int trans_a, int trans_b, int M, int N, int K, float alpha, const float* A,
                         int lda, const float* B, int ldb, float beta, float* C, int ldc);
using SetThreadingLayerFn = int (*)(int code);
using VersionStringFn = void (*)(char* buffer, int len);

// libmkl_rt's soname: MKL 2025 and later ship .so.3 (2024 and before .so.2).
constexpr const char* kMklRt = "libmkl_rt.so.3";

struct Mkl {
  std::optional<DynLib> lib;
  SgemmFn sgemm = nullptr;
  std::atomic<SgemmFn> ready{nullptr};  // sgemm, published once the status says loaded
  MklStatus status;
};

std::mutex& mkl_mutex() {
  static std::mutex mu;
  return mu;
}
Mkl& mkl() {
  static Mkl m;
  return m;
}
bool& tried() {
  static bool t = false;
  return t;
}

// CPUID leaf 0's vendor string is "GenuineIntel".
bool intel_cpu() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return false;
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4), std::memcpy(vendor + 4, &d, 4), std::memcpy(vendor + 8, &c, 4);
  return std::strcmp(vendor, "GenuineIntel") == 0;
}

void load_into(Mkl& m, const std::string& lib_dir) {
  const std::string path = lib_dir.empty() ? std::string(kMklRt) : lib_dir + "/" + kMklRt;
  m.status.library = path;
  m.lib.emplace(std::vector<std::string>{path}, DynLib::Scope::Local);
  if (!m.lib->handle()) {
    m.status.error = m.lib->error();
    return;
  }
  const auto set_layer = m.lib->sym<SetThreadingLayerFn>("MKL_Set_Threading_Layer");
  const auto version = m.lib->sym<VersionStringFn>("MKL_Get_Version_String");
  m.sgemm = m.lib->sym<SgemmFn>("cblas_sgemm");
  if (!set_layer || !version || !m.sgemm) {
    m.status.error = path + " lacks MKL_Set_Threading_Layer, MKL_Get_Version_String or cblas_sgemm (not oneMKL?)";
    return;
  }
  // Before the first computational call: afterwards MKL ignores it. Returns the layer now set.
  if (const int layer = set_layer(kMklThreadingGnu); layer != kMklThreadingGnu) {
    m.status.error = path + ": MKL would not take its GNU threading layer (libmkl_gnu_thread.so.3 missing beside it?)";
    return;
  }
  char buf[256] = {};
  version(buf, sizeof buf - 1);
  m.status.version = buf;
  m.status.loaded = true;
  m.status.own_kernels = intel_cpu();
  m.ready.store(m.sgemm, std::memory_order_release);
}

}  // namespace

const MklStatus& mkl_load(const std::string& lib_dir) {
  std::lock_guard lock(mkl_mutex());
  if (!tried()) {
    tried() = true;
    load_into(mkl(), lib_dir);
  }
  return mkl().status;
}

bool mkl_loaded() { return mkl().ready.load(std::memory_order_acquire) != nullptr; }

bool mkl_fast() { return mkl_loaded() && mkl().status.own_kernels; }

void mkl_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
              const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  const SgemmFn sgemm = mkl().ready.load(std::memory_order_acquire);
  DP_CHECK(sgemm != nullptr, "mkl_gemm before MKL was loaded (mkl_load)");
  sgemm(kCblasRowMajor, ta ? kCblasTrans : kCblasNoTrans, tb ? kCblasTrans : kCblasNoTrans, static_cast<int>(M),
        static_cast<int>(N), static_cast<int>(K), alpha, A, static_cast<int>(lda), B, static_cast<int>(ldb), beta, C,
        static_cast<int>(ldc));
}

}  // namespace dp::kernels::cpu
