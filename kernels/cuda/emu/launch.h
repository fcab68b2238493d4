// defines: dp::emu::launch, the emulation build's kernel launch (what DP_LAUNCH runs instead of
// <<<>>>): the arguments are converted to the kernel's parameter types once, as CUDA copies
// them, then every block of the grid runs to its end in order (x fastest, then y, then z), its
// threads as fibers (block.h). A fault stops the launch: the remaining blocks do not run, the
// launch reports cudaErrorLaunchFailure (errors.h). Also cudaFuncSetAttribute's dynamic
// shared-memory opt-in, which the launch limits consult.
#pragma once
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kernels/cuda/emu/block.h"
#include "kernels/cuda/emu/types.h"

namespace dp::emu {

// Runs the grid of `info` on this host thread; body(arg) is one CUDA thread's work.
void run_grid(const LaunchInfo& info, cudaStream_t stream, BlockRunner::Body body, void* arg);

// The dynamic shared memory `kernel` may use: 48 KiB, or what cudaFuncSetAttribute allowed.
size_t dynamic_shared_limit(const void* kernel);
cudaError_t set_dynamic_shared_limit(const void* kernel, int bytes);

template <typename... P, typename... A>
void launch(void (*kernel)(P...), const LaunchInfo& info, cudaStream_t stream, A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "the launch passes a different number of arguments than the kernel takes");
  std::tuple<std::decay_t<P>...> params(std::forward<A>(args)...);
  struct Call {
    void (*kernel)(P...);
    std::tuple<std::decay_t<P>...>* params;
  } call{kernel, &params};
  // Each thread gets its own copies of the parameters (a kernel may modify them).
  run_grid(info, stream, [](void* c) {
    auto* call = static_cast<Call*>(c);
    std::apply(call->kernel, *call->params);
  }, &call);
}

}  // namespace dp::emu

cudaError_t cudaFuncSetAttribute(const void* kernel, cudaFuncAttribute attr, int value);
template <typename... P>
cudaError_t cudaFuncSetAttribute(void (*kernel)(P...), cudaFuncAttribute attr, int value) {
  return cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attr, value);
}
