// defines: CloneIsa (the instruction sets the CPU loops of our own are compiled for), clone_isa()
// (the one this process runs: oneDNN's effective ISA, so ONEDNN_MAX_CPU_ISA limits both),
// clone_isa_name, onednn_isa_name, and the two macros that give a host loop its clones:
//   DP_VECTOR_CLONES(ret, name, params, args)  AVX-512, AVX2 (with FMA) and baseline clones of name##_body
//   DP_FMA_CLONES(ret, name, params, args)     x86-64-v3 (AVX2 + FMA) and baseline clones
// Each macro defines `ret name params`, which calls the clone for clone_isa(), and
// `name##_clone(CloneIsa)`, the clone for a given ISA, so a test can run every clone the CPU has
// and compare them. The body is an always-inline function, `name##_body`, written before the
// macro: inlined into each clone, it is compiled (vectorised) for that clone's instruction set.
// The AVX2 clone has FMA too: every AVX2 CPU has it (Haswell, Zen and after) and oneDNN's avx2
// kernels use it; a body that wants the same bits on every clone writes its multiply-adds as
// fp::fma (kernels/host_device.h) and is built with -ffp-contract=off, or has none.
//
// Why not GCC's target_clones: its resolver picks the clone from the CPU alone, at load time, and
// nothing can pin it; a CI run on an AVX-512 machine could then never run the AVX2 clones that an
// AVX2-only machine runs. Here one switch, oneDNN's own ONEDNN_MAX_CPU_ISA (or DNNL_MAX_CPU_ISA),
// limits oneDNN's JIT kernels and our clones together (docs/cpu-performance.md, "Instruction sets").
#pragma once
#include <string>

namespace dp::kernels::cpu {

enum class CloneIsa { Baseline, Avx2, Avx512 };

// The widest clone the CPU can run, within oneDNN's ISA limit (read once).
CloneIsa cpu_clone_isa();
// The clone this process runs now: cpu_clone_isa(), or a narrower one while a ScopedCloneIsa lives.
CloneIsa clone_isa();

// Runs the clones of `isa` (or of the CPU's own, if narrower) while it lives: how a test on a wide
// CPU runs the narrower clones in the same process. Not for concurrent use with other limits.
class ScopedCloneIsa {
 public:
  explicit ScopedCloneIsa(CloneIsa isa);
  ~ScopedCloneIsa();
  ScopedCloneIsa(const ScopedCloneIsa&) = delete;
  ScopedCloneIsa& operator=(const ScopedCloneIsa&) = delete;

 private:
  int previous_;
};
const char* clone_isa_name(CloneIsa isa);  // "avx512", "avx2", "baseline"
// oneDNN's effective ISA in its own words ("avx512_core_bf16", "avx2", ...).
std::string onednn_isa_name();
// Whether oneDNN runs on AVX-512 here (its effective ISA is avx512_core or above): what its f32
// Winograd convolution (jit_wino_4x3) and its brgemm f32 matmul need (Debian's 2.6.3).
bool onednn_has_avx512_core();

}  // namespace dp::kernels::cpu

#define DP_ISA_CLONE_DISPATCH_(ret, name, params)                                              \
  inline auto name##_clone(::dp::kernels::cpu::CloneIsa isa) {                                  \
    return isa == ::dp::kernels::cpu::CloneIsa::Avx512 ? &name##_avx512_                        \
           : isa == ::dp::kernels::cpu::CloneIsa::Avx2 ? &name##_avx2_                          \
                                                       : &name##_baseline_;                     \
  }

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__CUDACC__)
#define DP_VECTOR_CLONES(ret, name, params, args)                                               \
  __attribute__((target("avx512f"))) inline ret name##_avx512_ params { return name##_body args; } \
  __attribute__((target("avx2,fma"))) inline ret name##_avx2_ params { return name##_body args; }  \
  inline ret name##_baseline_ params { return name##_body args; }                               \
  DP_ISA_CLONE_DISPATCH_(ret, name, params)                                                     \
  inline ret name params { return name##_clone(::dp::kernels::cpu::clone_isa()) args; }
// FMA: fp::fma (kernels/host_device.h) is one instruction on x86-64-v3 and a libm call below it;
// it is exactly rounded either way, so both clones give the same bits.
#define DP_FMA_CLONES(ret, name, params, args)                                                  \
  __attribute__((target("arch=x86-64-v3"))) inline ret name##_avx2_ params { return name##_body args; } \
  inline ret name##_baseline_ params { return name##_body args; }                               \
  inline ret name##_avx512_ params { return name##_avx2_ args; }                                \
  DP_ISA_CLONE_DISPATCH_(ret, name, params)                                                     \
  inline ret name params { return name##_clone(::dp::kernels::cpu::clone_isa()) args; }
#else
#define DP_VECTOR_CLONES(ret, name, params, args)                                               \
  inline ret name##_avx512_ params { return name##_body args; }                                 \
  inline ret name##_avx2_ params { return name##_body args; }                                   \
  inline ret name##_baseline_ params { return name##_body args; }                               \
  DP_ISA_CLONE_DISPATCH_(ret, name, params)                                                     \
  inline ret name params { return name##_body args; }
#define DP_FMA_CLONES(ret, name, params, args) DP_VECTOR_CLONES(ret, name, params, args)
#endif
