#include "kernels/cpu/bf16_isa.h"

#include <fmt/format.h>

#include <cstdlib>

namespace dp::kernels::cpu {

CpuBf16Path cpu_bf16_path(std::string_view isa) {
  // oneDNN names each ISA after what it extends: avx512_core < _vnni < _bf16 < _amx.
  if (isa.rfind("avx512_core_amx", 0) == 0) return CpuBf16Path::Amx;
  if (isa.rfind("avx512_core_bf16", 0) == 0) return CpuBf16Path::Avx512Bf16;
  return CpuBf16Path::None;
}

const char* cpu_bf16_path_name(CpuBf16Path p) {
  switch (p) {
    case CpuBf16Path::Amx: return "AMX";
    case CpuBf16Path::Avx512Bf16: return "AVX-512-BF16";
    case CpuBf16Path::None: return "none";
  }
  return "?";
}

std::string cpu_bf16_refusal(std::string_view isa, std::string_view limit) {
  return fmt::format(
      "train.precision = \"bf16\" on the CPU needs AVX-512-BF16 or AMX (its matmuls run bf16 x bf16 -> f32 on "
      "them); this CPU's effective instruction set (oneDNN's) is {}{}. Set train.precision = \"fp32\", or train on "
      "a CPU that has them (Intel Cooper Lake, Sapphire Rapids and later; AMD Zen 4 and later){}",
      isa, limit.empty() ? " (no ISA limit set)" : fmt::format(", limited by {}", limit),
      limit.empty() ? "" : fmt::format(" without {}", limit.substr(0, limit.find('='))));
}

std::string onednn_isa_limit() {
  for (const char* v : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"})
    if (const char* s = std::getenv(v); s && *s) return fmt::format("{}={}", v, s);
  return "";
}

}  // namespace dp::kernels::cpu
