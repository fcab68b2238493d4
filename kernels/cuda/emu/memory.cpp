#include "kernels/cuda/emu/memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>

#include "kernels/cuda/emu/errors.h"
#include "kernels/cuda/emu/streams.h"

namespace dp::emu {
namespace {

constexpr size_t kAlignment = 256;      // cudaMalloc's guarantee
constexpr unsigned char kFresh = 0xFF;  // fresh device memory: NaN in every float type

enum class Kind { Device, Pinned };

struct Allocation {
  size_t bytes;
  Kind kind;
};

// Every live allocation by base address, shared by all host threads; counters for the pool.
struct Registry {
  std::mutex mu;
  std::map<const char*, Allocation> live;
  size_t device_bytes = 0, device_high = 0;
  // The default pool's reserve: what it holds from the device, at least what is in use; a free
  // keeps up to the release threshold (CUDA trims at synchronisations; here at once). Every
  // device allocation counts as the pool's.
  uint64_t release_threshold = 0;
  size_t reserved = 0, reserved_high = 0;
  void trim() { reserved = std::max<size_t>(device_bytes, std::min<uint64_t>(reserved, release_threshold)); }

  void add(void* p, size_t bytes, Kind kind) {
    std::lock_guard lock(mu);
    live.emplace(static_cast<const char*>(p), Allocation{bytes, kind});
    if (kind == Kind::Device) {
      device_high = std::max(device_high, device_bytes += bytes);
      reserved_high = std::max(reserved_high, reserved = std::max(reserved, device_bytes));
    }
  }
  // Whether p is the base of a live allocation of this kind (then it is unregistered).
  bool remove(void* p, Kind kind) {
    std::lock_guard lock(mu);
    auto it = live.find(static_cast<const char*>(p));
    if (it == live.end() || it->second.kind != kind) return false;
    if (kind == Kind::Device) {
      device_bytes -= it->second.bytes;
      trim();
    }
    live.erase(it);
    return true;
  }
  // Whether [p, p + bytes) lies inside one live device allocation.
  bool device_range(const void* p, size_t bytes) {
    std::lock_guard lock(mu);
    const char* c = static_cast<const char*>(p);
    auto it = live.upper_bound(c);
    if (it == live.begin()) return false;
    --it;
    return it->second.kind == Kind::Device && c + bytes <= it->first + it->second.bytes;
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

cudaError_t allocate(void** p, size_t bytes, Kind kind, const char* call) {
  if (p == nullptr) return api_error(cudaErrorInvalidValue, call, "null result pointer");
  *p = nullptr;
  if (bytes == 0) return cudaSuccess;
  // The device's capacity, checked before the host allocation (which ASan would refuse by
  // aborting the process for a size this large).
  if (kind == Kind::Device && bytes > kDeviceCapacity - device_bytes_in_use())
    return api_error(cudaErrorMemoryAllocation, call,
                     fmt::format("{} bytes asked, {} of the device's {} free", bytes,
                                 kDeviceCapacity - device_bytes_in_use(), kDeviceCapacity));
  // Exactly `bytes`, not rounded up: the first byte past the end is ASan's red zone.
  if (posix_memalign(p, kAlignment, bytes) != 0)
    return api_error(cudaErrorMemoryAllocation, call, fmt::format("{} bytes", bytes));
  if (kind == Kind::Device) std::memset(*p, kFresh, bytes);
  registry().add(*p, bytes, kind);
  return cudaSuccess;
}

cudaError_t release(void* p, Kind kind, const char* call) {
  if (p == nullptr) return cudaSuccess;
  if (!registry().remove(p, kind))
    return api_error(cudaErrorInvalidValue, call,
                     fmt::format("{} is not the start of a live {} allocation", p,
                                 kind == Kind::Device ? "device" : "pinned host"));
  std::free(p);
  return cudaSuccess;
}

// The device side of a copy or memset must lie in one device allocation.
cudaError_t check_device_range(const void* p, size_t bytes, const char* side, const char* call) {
  if (bytes == 0 || registry().device_range(p, bytes)) return cudaSuccess;
  return api_error(cudaErrorInvalidValue, call,
                   fmt::format("the {} [{}, +{} bytes) is not inside one device allocation", side, p, bytes));
}

cudaError_t copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, const char* call) {
  const bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault)
    return api_error(cudaErrorInvalidMemcpyDirection, call, fmt::format("kind {}", static_cast<int>(kind)));
  if (dst_dev)
    if (const cudaError_t e = check_device_range(dst, bytes, "destination", call); e != cudaSuccess) return e;
  if (src_dev)
    if (const cudaError_t e = check_device_range(src, bytes, "source", call); e != cudaSuccess) return e;
  if (bytes != 0) std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t fill(void* p, int value, size_t bytes, const char* call) {
  if (const cudaError_t e = check_device_range(p, bytes, "destination", call); e != cudaSuccess) return e;
  if (bytes != 0) std::memset(p, value, bytes);
  return cudaSuccess;
}

// The one default pool: its handle is only compared, never dereferenced.
cudaMemPool_t default_pool() { return reinterpret_cast<cudaMemPool_t>(&registry()); }

}  // namespace

size_t device_bytes_in_use() {
  std::lock_guard lock(registry().mu);
  return registry().device_bytes;
}

bool is_device_range(const void* p, size_t bytes) { return registry().device_range(p, bytes == 0 ? 1 : bytes); }

}  // namespace dp::emu

using dp::emu::api_error;
using dp::emu::check_stream;

cudaError_t cudaMalloc(void** p, size_t bytes) { return dp::emu::allocate(p, bytes, dp::emu::Kind::Device, "cudaMalloc"); }
cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t stream) {
  if (const cudaError_t e = check_stream(stream, "cudaMallocAsync"); e != cudaSuccess) return e;
  return dp::emu::allocate(p, bytes, dp::emu::Kind::Device, "cudaMallocAsync");
}
cudaError_t cudaFree(void* p) { return dp::emu::release(p, dp::emu::Kind::Device, "cudaFree"); }
cudaError_t cudaFreeAsync(void* p, cudaStream_t stream) {
  if (const cudaError_t e = check_stream(stream, "cudaFreeAsync"); e != cudaSuccess) return e;
  return dp::emu::release(p, dp::emu::Kind::Device, "cudaFreeAsync");
}
cudaError_t cudaMallocHost(void** p, size_t bytes) {
  return dp::emu::allocate(p, bytes, dp::emu::Kind::Pinned, "cudaMallocHost");
}
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned int) {
  return dp::emu::allocate(p, bytes, dp::emu::Kind::Pinned, "cudaHostAlloc");
}
cudaError_t cudaFreeHost(void* p) { return dp::emu::release(p, dp::emu::Kind::Pinned, "cudaFreeHost"); }

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (const cudaError_t e = dp::emu::copy(dst, src, bytes, kind, "cudaMemcpy"); e != cudaSuccess) return e;
  return dp::emu::take_pending_fault();  // a synchronous copy waits for the kernels before it
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  if (const cudaError_t e = check_stream(stream, "cudaMemcpyAsync"); e != cudaSuccess) return e;
  return dp::emu::copy(dst, src, bytes, kind, "cudaMemcpyAsync");
}
cudaError_t cudaMemset(void* p, int value, size_t bytes) { return dp::emu::fill(p, value, bytes, "cudaMemset"); }
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t stream) {
  if (const cudaError_t e = check_stream(stream, "cudaMemsetAsync"); e != cudaSuccess) return e;
  return dp::emu::fill(p, value, bytes, "cudaMemsetAsync");
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  if (free == nullptr || total == nullptr) return api_error(cudaErrorInvalidValue, "cudaMemGetInfo", "null pointer");
  *total = dp::emu::kDeviceCapacity;
  *free = dp::emu::kDeviceCapacity - dp::emu::device_bytes_in_use();
  return cudaSuccess;
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  if (pool == nullptr || device != 0)
    return api_error(cudaErrorInvalidValue, "cudaDeviceGetDefaultMemPool", "null pointer or device other than 0");
  *pool = dp::emu::default_pool();
  return cudaSuccess;
}

// Reserved and used memory are the same here: the emulator keeps no cache of freed blocks.
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
  if (pool != dp::emu::default_pool() || value == nullptr)
    return api_error(cudaErrorInvalidValue, "cudaMemPoolGetAttribute", "unknown pool or null value");
  auto& r = dp::emu::registry();
  std::lock_guard lock(r.mu);
  switch (attr) {
    case cudaMemPoolAttrReleaseThreshold: *static_cast<uint64_t*>(value) = r.release_threshold; return cudaSuccess;
    case cudaMemPoolAttrReservedMemCurrent: *static_cast<uint64_t*>(value) = r.reserved; return cudaSuccess;
    case cudaMemPoolAttrUsedMemCurrent: *static_cast<uint64_t*>(value) = r.device_bytes; return cudaSuccess;
    case cudaMemPoolAttrReservedMemHigh: *static_cast<uint64_t*>(value) = r.reserved_high; return cudaSuccess;
    case cudaMemPoolAttrUsedMemHigh: *static_cast<uint64_t*>(value) = r.device_high; return cudaSuccess;
  }
  return api_error(cudaErrorInvalidValue, "cudaMemPoolGetAttribute", "unknown attribute");
}

// Settable as in CUDA: the release threshold and the high-water marks (reset to 0 only).
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
  if (pool != dp::emu::default_pool() || value == nullptr)
    return api_error(cudaErrorInvalidValue, "cudaMemPoolSetAttribute", "unknown pool or null value");
  auto& r = dp::emu::registry();
  std::lock_guard lock(r.mu);
  const uint64_t v = *static_cast<uint64_t*>(value);
  switch (attr) {
    case cudaMemPoolAttrReleaseThreshold:
      r.release_threshold = v;
      r.trim();
      return cudaSuccess;
    case cudaMemPoolAttrReservedMemHigh:
      if (v != 0) break;
      r.reserved_high = r.reserved;
      return cudaSuccess;
    case cudaMemPoolAttrUsedMemHigh:
      if (v != 0) break;
      r.device_high = r.device_bytes;
      return cudaSuccess;
    default: break;
  }
  return api_error(cudaErrorInvalidValue, "cudaMemPoolSetAttribute", "attribute not settable to this value");
}
