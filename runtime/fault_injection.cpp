#include "runtime/fault_injection.h"

#include <mutex>
#include <utility>

#include "runtime/device_error.h"
#include "runtime/device_memory.h"

namespace dp {

namespace detail {
std::atomic<bool> g_device_oom_fault_armed{false};
}

namespace {
std::mutex g_mu;
std::string g_origin;  // guarded by g_mu
}  // namespace

void arm_device_oom_fault(const std::string& origin) {
  std::lock_guard lock(g_mu);
  g_origin = origin;
  detail::g_device_oom_fault_armed.store(true, std::memory_order_relaxed);
}

void disarm_device_oom_fault() { detail::g_device_oom_fault_armed.store(false, std::memory_order_relaxed); }

void raise_device_oom_fault(const Tensor& y) {
  DeviceOomInfo info;
  {
    std::lock_guard lock(g_mu);
    disarm_device_oom_fault();
    info.call = g_origin + ", an injected fault";
  }
  const MemoryInfo m = device_memory_info(y.device());
  info.device = y.device().str();
  info.identity = identity_string();
  info.allocation = fmt::format("a {} {} tensor, its output's size", shape_str(y.shape()), dtype_name(y.dtype()));
  info.asked = y.nbytes();
  info.free = m.free, info.total = m.total;
  throw DeviceOutOfMemory(std::move(info));
}

}  // namespace dp
