// defines: CpuBf16Path (what runs train.precision = "bf16"'s matmuls on the CPU: AMX tiles,
// AVX-512-BF16 dot products, or nothing), cpu_bf16_path (the pure choice from oneDNN's effective
// ISA, kernels/cpu/isa.h's onednn_isa_name), cpu_bf16_path_name, cpu_bf16_refusal (the error for
// a CPU that has neither) and onednn_isa_limit (the ISA limit the environment sets for oneDNN).
//
// Why no emulated path: oneDNN 2.6.3 runs bf16 matmuls below avx512_core_bf16 on its reference
// kernels (or converts on avx512_core), many times slower than f32 (issue 33: "a silent 10x
// slowdown is not acceptable"); a CPU without the instructions is refused before training.
#pragma once
#include <string>
#include <string_view>

namespace dp::kernels::cpu {

enum class CpuBf16Path { None, Avx512Bf16, Amx };

// The path oneDNN's effective ISA (its own name: "avx512_core_amx", "avx512_core_bf16", "avx2",
// ...) gives bf16 x bf16 -> f32 matmuls: Amx with AMX, Avx512Bf16 with AVX-512-BF16, else None.
CpuBf16Path cpu_bf16_path(std::string_view onednn_isa);
// "AMX", "AVX-512-BF16", "none": the words of the CPU-kernels log line.
const char* cpu_bf16_path_name(CpuBf16Path p);
// The error for train.precision = "bf16" on a CPU whose effective ISA is `onednn_isa`, `limit`
// being onednn_isa_limit() ("" when none is set): what is missing, where, and what to do.
std::string cpu_bf16_refusal(std::string_view onednn_isa, std::string_view limit);
// "ONEDNN_MAX_CPU_ISA=AVX2" (or DNNL_MAX_CPU_ISA=..., the one oneDNN reads: ONEDNN_ first), or "".
std::string onednn_isa_limit();

}  // namespace dp::kernels::cpu
