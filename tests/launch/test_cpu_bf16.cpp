// train.precision = "bf16" on the CPU, the real binary: refused before training with the exact
// words of kernels/cpu/bf16_isa.h when oneDNN is limited below AVX-512-BF16 (oneDNN reads its ISA
// limit once per process, hence a process per limit), and where the CPU has it, a run whose
// CPU-kernels line says bf16 and the instruction set.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "kernels/cpu/bf16_isa.h"
#include "kernels/cpu/isa.h"

namespace dp::kernels::cpu {
namespace {

// The first line of a 2-step bf16 training run's output that contains `needle`, from `needle`
// on; run with `env_prefix` (e.g. an ISA limit).
std::string bf16_run_line(const std::string& env_prefix, const std::string& needle) {
  const auto dir = std::filesystem::temp_directory_path() / ("dptrain_cpu_bf16_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string cfg = (dir / "m.cfg").string(), log = (dir / "log").string();
  std::ofstream(cfg) << "[run]\ndir = \"" << (dir / "runs").string()
                     << "\"\n[data]\ndataset = \"synthetic\"\nsynthetic_train = 64\nsynthetic_eval = 16\n"
                        "synthetic_shape = [1, 4, 4]\n[model]\npreset = \"mlp\"\nhidden = [8]\n"
                        "[train]\nsteps = 2\nbatch_size = 16\nthreads = 1\nprecision = \"bf16\"\n"
                        "[checkpoint]\nfinal = false\n";
  const std::string cmd = "env -u ONEDNN_MAX_CPU_ISA -u DNNL_MAX_CPU_ISA " + env_prefix + " " DPTRAIN_BINARY_DIR
                          "/dptrain " + cfg + " > " + log + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream in(log);
  std::string line, found = "exit " + std::to_string(rc) + ", no line with '" + needle + "'";
  while (std::getline(in, line))
    if (const size_t at = line.find(needle); at != std::string::npos) {
      found = line.substr(at);
      break;
    }
  std::filesystem::remove_all(dir);
  return found;
}

TEST(CpuBf16, RefusedBelowAvx512Bf16ThroughTheIsaLimit) {
  if (cpu_clone_isa() != CloneIsa::Avx512) GTEST_SKIP() << "no AVX-512 here: the limits below would not limit";
  const std::string head = "train.precision = \"bf16\" on the CPU needs";
  EXPECT_EQ(bf16_run_line("DNNL_MAX_CPU_ISA=AVX512_CORE", head), cpu_bf16_refusal("avx512_core",
                                                                                  "DNNL_MAX_CPU_ISA=AVX512_CORE"));
  EXPECT_EQ(bf16_run_line("ONEDNN_MAX_CPU_ISA=AVX2", head),
            "train.precision = \"bf16\" on the CPU needs AVX-512-BF16 or AMX (its matmuls run bf16 x bf16 -> f32 on "
            "them); this CPU's effective instruction set (oneDNN's) is avx2, limited by ONEDNN_MAX_CPU_ISA=AVX2. Set "
            "train.precision = \"fp32\", or train on a CPU that has them (Intel Cooper Lake, Sapphire Rapids and "
            "later; AMD Zen 4 and later) without ONEDNN_MAX_CPU_ISA");
}

TEST(CpuBf16, TheKernelsLineSaysBf16AndTheInstructionSet) {
  const std::string isa = onednn_isa_name();
  const CpuBf16Path path = cpu_bf16_path(isa);
  if (path == CpuBf16Path::None) GTEST_SKIP() << "no AVX-512-BF16 or AMX here (" << isa << ")";
  EXPECT_EQ(bf16_run_line("", "linear GEMMs: "),
            "linear GEMMs: bf16 x bf16 -> f32 on oneDNN's matmul (" + std::string(cpu_bf16_path_name(path)) +
                "), the rest f32; ISA: oneDNN " + isa + ", own loops avx512");
}

}  // namespace
}  // namespace dp::kernels::cpu
