// defines: the device-memory hooks Storage uses for non-CPU devices. The CUDA build implements
// them with the stream-ordered allocator (device_memory_cuda.cpp); without CUDA they fail with a
// clear error (runtime/no_cuda.cpp).
#pragma once
#include <cstddef>

#include "base/device.h"

namespace dp {
void* device_alloc(size_t bytes, Device device);
void device_free(void* p, Device device) noexcept;
void device_copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes);
void device_memset_zero(void* p, Device device, size_t bytes);
// Number of usable CUDA devices; 0 when built without CUDA or when no driver/GPU is present.
int cuda_device_count();
// True in a CUDA build (the toolkit was found at configure time), whether or not a GPU is present.
bool built_with_cuda();
}  // namespace dp
