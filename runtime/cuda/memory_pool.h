// defines: configure_memory_pool, memory_pool_stats, reset_memory_pool_peak — the device's
// default stream-ordered memory pool (the one cudaMallocAsync draws from), for DeviceBuffer and
// for the end-of-run report ("peak device memory").
#pragma once
#include <cstdint>

namespace dp::cuda {

// Keeps freed memory in the pool instead of returning it to the driver at every
// synchronisation (release threshold = unlimited): the default threshold of 0 would make every
// step re-map its activations. Call once per device at start-up.
void configure_memory_pool(int device);

struct MemoryPoolStats {
  uint64_t used_bytes = 0;           // cudaMemPoolAttrUsedMemCurrent: held by live allocations
  uint64_t used_high_bytes = 0;      // cudaMemPoolAttrUsedMemHigh: the peak of the above
  uint64_t reserved_bytes = 0;       // cudaMemPoolAttrReservedMemCurrent: mapped from the driver
  uint64_t reserved_high_bytes = 0;  // cudaMemPoolAttrReservedMemHigh
};
MemoryPoolStats memory_pool_stats(int device);
// Starts a new peak window (both "high" attributes back to the current values).
void reset_memory_pool_peak(int device);

}  // namespace dp::cuda
