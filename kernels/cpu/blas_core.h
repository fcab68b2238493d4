// defines: OpenBLAS kernel selection. Debian's OpenBLAS picks its kernels from the CPU model at
// load time; on CPUs it does not know (new Xeons, many VMs) it falls back to "Prescott" (SSE3),
// three times slower than the AVX-512 kernels the CPU can run. The choice can only be changed
// through OPENBLAS_CORETYPE before the library loads, hence a one-time re-exec (cpu_env.h).
#pragma once
#include <string>

namespace dp::kernels::cpu {

struct CpuFeatures {
  bool avx2 = false, fma = false, avx512f = false, avx512bw = false, avx512dq = false, avx512vl = false;
};
CpuFeatures cpu_features();

// The core type to force, or "" to keep OpenBLAS's own choice (pure; tested).
std::string preferred_openblas_core(const std::string& current_core, const CpuFeatures& f);

// The core OpenBLAS selected ("Prescott", "Haswell", "SkylakeX", ...).
std::string openblas_core();

}  // namespace dp::kernels::cpu
