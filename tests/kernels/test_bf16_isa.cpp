// train.precision = "bf16" on the CPU (kernels/cpu/bf16_isa.h): the path each of oneDNN's ISAs
// gives, and the refusal's exact words. (tests/launch/test_cpu_bf16.cpp refuses a real run
// through the ISA limit.)
#include <gtest/gtest.h>

#include "kernels/cpu/bf16_isa.h"

namespace dp::kernels::cpu {
namespace {

TEST(CpuBf16Path, AmxOrAvx512Bf16FromOnednnsIsa) {
  EXPECT_EQ(cpu_bf16_path("avx512_core_amx"), CpuBf16Path::Amx);
  EXPECT_EQ(cpu_bf16_path("avx512_core_bf16"), CpuBf16Path::Avx512Bf16);
  for (const char* isa : {"avx512_core_vnni", "avx512_core", "avx512_mic", "avx2_vnni", "avx2", "avx", "sse41",
                          "baseline", ""})
    EXPECT_EQ(cpu_bf16_path(isa), CpuBf16Path::None) << isa;
  EXPECT_STREQ(cpu_bf16_path_name(CpuBf16Path::Amx), "AMX");
  EXPECT_STREQ(cpu_bf16_path_name(CpuBf16Path::Avx512Bf16), "AVX-512-BF16");
}

TEST(CpuBf16Path, RefusalSaysWhatWhereAndWhatToDo) {
  EXPECT_EQ(cpu_bf16_refusal("avx2", "ONEDNN_MAX_CPU_ISA=AVX2"),
            "train.precision = \"bf16\" on the CPU needs AVX-512-BF16 or AMX (its matmuls run bf16 x bf16 -> f32 on "
            "them); this CPU's effective instruction set (oneDNN's) is avx2, limited by ONEDNN_MAX_CPU_ISA=AVX2. Set "
            "train.precision = \"fp32\", or train on a CPU that has them (Intel Cooper Lake, Sapphire Rapids and "
            "later; AMD Zen 4 and later) without ONEDNN_MAX_CPU_ISA");
  EXPECT_EQ(cpu_bf16_refusal("avx512_core_vnni", ""),
            "train.precision = \"bf16\" on the CPU needs AVX-512-BF16 or AMX (its matmuls run bf16 x bf16 -> f32 on "
            "them); this CPU's effective instruction set (oneDNN's) is avx512_core_vnni (no ISA limit set). Set "
            "train.precision = \"fp32\", or train on a CPU that has them (Intel Cooper Lake, Sapphire Rapids and "
            "later; AMD Zen 4 and later)");
}

}  // namespace
}  // namespace dp::kernels::cpu
