#include "kernels/cpu/blas_core.h"

extern "C" char* openblas_get_corename(void);

namespace dp::kernels::cpu {

CpuFeatures cpu_features() {
  CpuFeatures f;
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  return f;
}

std::string preferred_openblas_core(const std::string& current, const CpuFeatures& f) {
  // Only override OpenBLAS's generic fallbacks; a specific choice it made stays.
  const bool generic = current == "Prescott" || current == "Core2" || current == "Nehalem" || current == "Unknown" ||
                       current == "Sandybridge" || current.empty();
  if (!generic) return "";
  if (f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl) return current == "SkylakeX" ? "" : "SkylakeX";
  if (f.avx2 && f.fma) return "Haswell";
  return "";
}

std::string openblas_core() {
  const char* n = openblas_get_corename();
  return n ? n : "";
}

}  // namespace dp::kernels::cpu
