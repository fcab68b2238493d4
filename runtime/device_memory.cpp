// The part of the device-memory hooks (runtime/device_memory.h) that every build shares.
#include "runtime/device_memory.h"

#include <unistd.h>

namespace dp {

MemoryInfo host_memory_info() noexcept {
  const long page = ::sysconf(_SC_PAGE_SIZE), avail = ::sysconf(_SC_AVPHYS_PAGES), phys = ::sysconf(_SC_PHYS_PAGES);
  if (page <= 0 || avail < 0 || phys <= 0) return {};
  return {static_cast<uint64_t>(avail) * static_cast<uint64_t>(page), static_cast<uint64_t>(phys) * static_cast<uint64_t>(page)};
}

}  // namespace dp
