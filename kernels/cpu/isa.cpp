#include "kernels/cpu/isa.h"

#include <dnnl.hpp>

#include <algorithm>
#include <atomic>

namespace dp::kernels::cpu {
namespace {

using I = dnnl::cpu_isa;

// oneDNN's ISA values are bit sets, each containing the bits of what it extends.
bool has(I isa, I want) { return (static_cast<unsigned>(isa) & static_cast<unsigned>(want)) == static_cast<unsigned>(want); }

// The AVX2 clones use FMA too (isa.h), so a CPU with AVX2 and without FMA runs the baseline ones.
CloneIsa from_onednn(I isa, bool fma) {
  if (has(isa, I::avx512_core)) return CloneIsa::Avx512;
  if (has(isa, I::avx2) && fma) return CloneIsa::Avx2;
  return CloneIsa::Baseline;
}

std::atomic<int> g_limit{-1};  // a ScopedCloneIsa's, or -1

}  // namespace

CloneIsa cpu_clone_isa() {
  // oneDNN reads ONEDNN_MAX_CPU_ISA (DNNL_MAX_CPU_ISA) on this first query and keeps it.
  static const CloneIsa isa = from_onednn(dnnl::get_effective_cpu_isa(), __builtin_cpu_supports("fma"));
  return isa;
}

CloneIsa clone_isa() {
  const int limit = g_limit.load(std::memory_order_relaxed);
  const CloneIsa cpu = cpu_clone_isa();
  return limit < 0 ? cpu : std::min(cpu, static_cast<CloneIsa>(limit));
}

ScopedCloneIsa::ScopedCloneIsa(CloneIsa isa) : previous_(g_limit.exchange(static_cast<int>(isa))) {}
ScopedCloneIsa::~ScopedCloneIsa() { g_limit.store(previous_); }

const char* clone_isa_name(CloneIsa isa) {
  switch (isa) {
    case CloneIsa::Avx512: return "avx512";
    case CloneIsa::Avx2: return "avx2";
    case CloneIsa::Baseline: return "baseline";
  }
  return "?";
}

std::string onednn_isa_name() {
  switch (dnnl::get_effective_cpu_isa()) {
    case I::avx512_core_amx: return "avx512_core_amx";
    case I::avx512_core_bf16: return "avx512_core_bf16";
    case I::avx512_core_vnni: return "avx512_core_vnni";
    case I::avx512_core: return "avx512_core";
    case I::avx512_mic_4ops: return "avx512_mic_4ops";
    case I::avx512_mic: return "avx512_mic";
    case I::avx2_vnni: return "avx2_vnni";
    case I::avx2: return "avx2";
    case I::avx: return "avx";
    case I::sse41: return "sse41";
    default: return "baseline";
  }
}

// The same answer as cpu_clone_isa()'s, read once (the linear layers ask on every call).
bool onednn_has_avx512_core() { return cpu_clone_isa() == CloneIsa::Avx512; }

}  // namespace dp::kernels::cpu
