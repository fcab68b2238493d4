// defines: DP_LAUNCH, the project's one way to launch a kernel:
//
//   DP_LAUNCH(kernel, grid, block, shared_bytes, stream)(args...);
//
// In the nvcc build it is the triple-chevron launch kernel<<<grid, block, shared_bytes,
// stream>>>(args...); in the emulation build (DP_CUDA_EMU, kernels/cuda/emu/README.md) it runs
// the grid on the host. In both it first checks the shape against the target's limits
// (launch_limits.h) and refuses one CUDA would refuse — the launch does not run and
// cudaGetLastError reports cudaErrorInvalidConfiguration, with the reason on stderr — so the
// emulator never runs a launch the GPU would not. A templated kernel needs no parentheses:
// DP_LAUNCH(augment_kernel<In, To, true>, grid, block, 0, stream)(...).
//
// Header for .cu files; C++17, since nvcc compiles them as C++17 (kernels/CMakeLists.txt).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdio>
#include <string>
#include <utility>

#include "kernels/cuda/launch_limits.h"

#if defined(DP_CUDA_EMU)
#include "kernels/cuda/emu/errors.h"
#include "kernels/cuda/emu/launch.h"
#endif

namespace dp::kernels::cuda {

// The kernel of DP_LAUNCH's text "kernel<A, B>, grid, block, shared, stream": everything before
// the first comma outside <> and ().
inline std::string launch_kernel_name(const char* text) {
  int depth = 0;
  const char* p = text;
  for (; *p != '\0'; ++p) {
    if (*p == '<' || *p == '(') ++depth;
    if (*p == '>' || *p == ')') --depth;
    if (*p == ',' && depth == 0) break;
  }
  return std::string(text, p);
}

template <typename... P>
class KernelLaunch {
 public:
  KernelLaunch(void (*kernel)(P...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
               const char* text, const char* file, int line)
      : kernel_(kernel), grid_(grid), block_(block), shared_(shared_bytes), stream_(stream), text_(text),
        file_(file), line_(line) {}

  template <typename... A>
  void operator()(A&&... args) const {
    const std::string problem = launch_problem(grid_, block_, shared_, dynamic_shared_limit());
#if defined(DP_CUDA_EMU)
    if (!problem.empty()) {
      ::dp::emu::api_error(cudaErrorInvalidConfiguration, "kernel launch", refusal(problem));
      return;
    }
    ::dp::emu::launch(kernel_, ::dp::emu::LaunchInfo{launch_kernel_name(text_), grid_, block_, shared_, file_, line_},
                      stream_, std::forward<A>(args)...);
#else
    if (!problem.empty()) {
      std::fprintf(stderr, "dptrain: %s\n", refusal(problem).c_str());
      // A zero grid is CUDA's own cudaErrorInvalidConfiguration: the launch fails as CUDA would,
      // and cudaGetLastError reports it.
      kernel_<<<dim3(0, 0, 0), block_, 0, stream_>>>(std::forward<A>(args)...);
      return;
    }
    kernel_<<<grid_, block_, shared_, stream_>>>(std::forward<A>(args)...);
#endif
  }

 private:
  size_t dynamic_shared_limit() const {
#if defined(DP_CUDA_EMU)
    return ::dp::emu::dynamic_shared_limit(reinterpret_cast<const void*>(kernel_));
#else
    return kSm90.max_shared_optin;  // the runtime itself enforces the 48 KiB default without the opt-in
#endif
  }
  std::string refusal(const std::string& problem) const {
    return "launch of " + launch_kernel_name(text_) + " at " + file_ + ":" + std::to_string(line_) +
           " refused: " + problem;
  }

  void (*kernel_)(P...);
  dim3 grid_, block_;
  size_t shared_;
  cudaStream_t stream_;
  const char* text_;
  const char* file_;
  int line_;
};

template <typename... P>
KernelLaunch<P...> make_launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t shared_bytes,
                               cudaStream_t stream, const char* text, const char* file, int line) {
  return KernelLaunch<P...>(kernel, grid, block, shared_bytes, stream, text, file, line);
}

}  // namespace dp::kernels::cuda

#define DP_LAUNCH(...) ::dp::kernels::cuda::make_launch(__VA_ARGS__, #__VA_ARGS__, __FILE__, __LINE__)
