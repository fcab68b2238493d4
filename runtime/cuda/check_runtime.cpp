#include "runtime/cuda/check_runtime.h"

#include <utility>

#include "runtime/device_error.h"
#include "runtime/device_memory.h"
#include "runtime/last_dispatch.h"

namespace dp {

void fail_check(const char* lib, const char* expr, const char* file, int line, const std::string& what,
                const std::string& hint) {
  throw DpError(fmt::format("{} error: {} at {}:{} [{}]: {}{}", lib, expr, file, line, identity_string(), what,
                            hint.empty() ? "" : "; hint: " + hint));
}

std::string cuda_hint(cudaError_t e) {
  switch (e) {
    case cudaErrorInsufficientDriver:
    case cudaErrorNoDevice:
      return "no usable GPU on this host; run with train.device = \"cpu\" or check nvidia-smi";
    case cudaErrorInvalidDevice:
      return "the device index is beyond the visible GPUs; check CUDA_VISIBLE_DEVICES and the local rank";
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
      return "this binary was not built for this GPU; rebuild with -DCMAKE_CUDA_ARCHITECTURES=<sm of the GPU>";
    default:
      return "";
  }
}

bool cuda_error_is_async_fault(cudaError_t e) {
  // By number: the emulator's headers (kernels/cuda/emu/) declare only some of these names.
  // 214 ECC uncorrectable, 700 illegal address, 702 launch timeout, 710 assert, 714 hardware
  // stack error, 715 illegal instruction, 716 misaligned address, 717 invalid address space,
  // 718 invalid pc, 719 launch failure.
  switch (static_cast<int>(e)) {
    case 214: case 700: case 702: case 710: case 714: case 715: case 716: case 717: case 718: case 719:
      return true;
    default:
      return false;
  }
}

std::string async_fault_hint(const std::string& last) {
  return fmt::format(
      "a kernel faulted; CUDA reports that at the next call that checks, so this call is where it surfaced, not "
      "where it happened: the faulting kernel is {} or one enqueued before it; rerun with CUDA_LAUNCH_BLOCKING=1 "
      "(every launch then waits, and the error names the faulting layer) or under compute-sanitizer; the GPU context "
      "is unusable for the rest of this process",
      last.empty() ? "one enqueued earlier (no layer was dispatched on this thread)"
                   : "in the last layer dispatched on this thread, " + last + ",");
}

void fail_cuda(cudaError_t e, const char* expr, const char* file, int line) {
  if (e == cudaErrorMemoryAllocation) fail_device_oom(expr, file, line, 0);
  const std::string hint = cuda_error_is_async_fault(e) ? async_fault_hint(last_dispatch()) : cuda_hint(e);
  fail_check("CUDA", expr, file, line, fmt::format("{} ({})", cudaGetErrorString(e), static_cast<int>(e)), hint);
}

void fail_cuda_alloc(cudaError_t e, const char* expr, const char* file, int line, size_t bytes) {
  if (e == cudaErrorMemoryAllocation) fail_device_oom(expr, file, line, bytes);
  fail_cuda(e, expr, file, line);
}

void fail_device_oom(const std::string& call, const char* file, int line, size_t bytes) {
  (void)cudaGetLastError();
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) (void)cudaGetLastError(), device = 0;
  const MemoryInfo m = device_memory_info(Device::cuda(device));
  DeviceOomInfo info;
  info.device = Device::cuda(device).str();
  info.call = call;
  info.source = fmt::format("{}:{}", file, line);
  info.identity = identity_string();
  info.asked = bytes;
  info.free = m.free, info.total = m.total;
  throw DeviceOutOfMemory(std::move(info));
}

}  // namespace dp
