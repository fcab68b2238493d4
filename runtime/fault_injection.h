// defines: the injected device-out-of-memory fault (DPTRAIN_FAULT_DEVICE_OOM_AT_STEP, for tests):
// armed by the trainer at the start of the step, it makes the next layer dispatch throw
// DeviceOutOfMemory (runtime/device_error.h) on the CPU or the GPU, from inside Layer::forward,
// so that from there up it takes the path a real one takes (the layer's name added, the trainer's
// resume note, dptrain's exit status).
#pragma once
#include <atomic>
#include <string>

#include "runtime/tensor.h"

namespace dp {

namespace detail {
extern std::atomic<bool> g_device_oom_fault_armed;
}

// origin: what armed it ("DPTRAIN_FAULT_DEVICE_OOM_AT_STEP=3"), which the message names as the call.
void arm_device_oom_fault(const std::string& origin);
void disarm_device_oom_fault();
// One relaxed load: what Layer::forward/backward pay when nothing is armed.
inline bool device_oom_fault_armed() noexcept {
  return detail::g_device_oom_fault_armed.load(std::memory_order_relaxed);
}
// Disarms, then throws DeviceOutOfMemory as a failed allocation of y's size on y's device would
// (with that device's real free and total memory).
[[noreturn]] void raise_device_oom_fault(const Tensor& y);

}  // namespace dp
