// defines: the device-memory hooks Storage uses for non-CPU devices. The CUDA build implements
// them with the stream-ordered allocator (device_memory_cuda.cpp); without CUDA they fail with a
// clear error (runtime/no_cuda.cpp).
#pragma once
#include <cstddef>
#include <cstdint>

#include "base/device.h"

namespace dp {
// A failed device allocation throws DeviceOutOfMemory (runtime/device_error.h) with the bytes
// asked and the device's free memory.
void* device_alloc(size_t bytes, Device device);
void device_free(void* p, Device device) noexcept;
void device_copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes);
void device_memset_zero(void* p, Device device, size_t bytes);
// Blocks until the work submitted so far to `cuda_stream` (a cudaStream_t) has completed: what a
// host-side collective needs before it reads device data written there (collectives/communicator.h).
void device_stream_synchronize(void* cuda_stream);
// Free and total memory, bytes: the device's (cudaMemGetInfo) or, for the CPU, the host's (free
// physical pages). {0, 0} when it cannot be read (no such device, a build without CUDA). Never
// throws: error paths call it.
struct MemoryInfo {
  uint64_t free = 0, total = 0;
};
MemoryInfo device_memory_info(Device device) noexcept;
MemoryInfo host_memory_info() noexcept;
// Number of usable CUDA devices; 0 when built without CUDA or when no driver/GPU is present.
int cuda_device_count();
// True in a CUDA build (the toolkit was found at configure time), whether or not a GPU is present.
bool built_with_cuda();
}  // namespace dp
