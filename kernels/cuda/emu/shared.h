// defines: the emulation build's shared memory — shared_array<T[N]...>, the per-block storage
// behind DP_SHARED (kernels/cuda/shared_memory.cuh), seen through SharedView/SharedRef, and
// dynamic_shared<T>, the storage behind DP_DYNAMIC_SHARED.
//
// Each DP_SHARED array is a heap block of its exact size (ASan's red zones at both ends), one per
// launch, filled with 0xFF bytes (NaN) at the start of every block: shared memory starts
// undefined. Every index is checked against its dimension (an out-of-range index is a fault
// naming the array, the index and the thread, like compute-sanitizer's memcheck). With
// DP_EMU_RACECHECK=1 every element access also goes through racecheck.h's rules.
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/cuda/emu/block.h"
#include "kernels/cuda/emu/racecheck.h"

namespace dp::emu {

struct SharedArrayInfo {
  const void* tag;  // the declaration (DP_SHARED's static tag: one per declaration and instantiation)
  const char* name;
  unsigned char* data;
  size_t bytes;
  size_t elem_size;
  size_t extents[4];
  int rank;
  std::vector<RaceCell> shadow;  // one per element, with racecheck on
  uint64_t block_serial;         // the block whose poison fill `data` has
};

// The running launch's storage for this declaration, made on first use and poisoned once per block.
SharedArrayInfo& shared_storage(const void* tag, const char* name, size_t bytes, size_t elem_size, size_t align,
                                const size_t* extents, int rank);
[[noreturn]] void shared_index_fault(const SharedArrayInfo& a, int dim, long long index);
void shared_access(SharedArrayInfo& a, size_t element, bool write);  // racecheck

// One element; reads and writes are checked when racecheck is on.
template <typename T>
class SharedRef {
 public:
  SharedRef(SharedArrayInfo* a, size_t i) : a_(a), i_(i) {}
  operator T() const {
    if (t_block->racecheck()) shared_access(*a_, i_, false);
    return ptr()[0];
  }
  const SharedRef& operator=(const T& v) const {
    if (t_block->racecheck()) shared_access(*a_, i_, true);
    ptr()[0] = v;
    return *this;
  }
  const SharedRef& operator=(const SharedRef& o) const { return *this = static_cast<T>(o); }
  template <typename U> const SharedRef& operator+=(const U& v) const { return *this = static_cast<T>(T(*this) + v); }
  template <typename U> const SharedRef& operator-=(const U& v) const { return *this = static_cast<T>(T(*this) - v); }
  template <typename U> const SharedRef& operator*=(const U& v) const { return *this = static_cast<T>(T(*this) * v); }
  template <typename U> const SharedRef& operator/=(const U& v) const { return *this = static_cast<T>(T(*this) / v); }
  template <typename U> const SharedRef& operator|=(const U& v) const { return *this = static_cast<T>(T(*this) | v); }
  template <typename U> const SharedRef& operator&=(const U& v) const { return *this = static_cast<T>(T(*this) & v); }
  template <typename U> const SharedRef& operator^=(const U& v) const { return *this = static_cast<T>(T(*this) ^ v); }
  const SharedRef& operator++() const { return *this += 1; }
  const SharedRef& operator--() const { return *this -= 1; }
  T operator++(int) const { const T old = *this; *this = static_cast<T>(old + 1); return old; }
  T operator--(int) const { const T old = *this; *this = static_cast<T>(old - 1); return old; }

 private:
  T* ptr() const { return reinterpret_cast<T*>(a_->data) + i_; }
  SharedArrayInfo* a_;
  size_t i_;
};

// An array A (T[N], T[N][M], ...) or a sub-array of one; [] checks the index.
template <typename A>
class SharedView {
  using E = std::remove_all_extents_t<A>;
  using Sub = std::remove_extent_t<A>;

 public:
  SharedView(SharedArrayInfo* a, size_t first, int dim) : a_(a), first_(first), dim_(dim) {}
  template <typename I, typename = std::enable_if_t<std::is_integral_v<I> || std::is_enum_v<I>>>
  auto operator[](I i) const {
    const long long idx = static_cast<long long>(i);
    if (idx < 0 || static_cast<unsigned long long>(idx) >= std::extent_v<A>) shared_index_fault(*a_, dim_, idx);
    const size_t at = first_ + static_cast<size_t>(idx) * (sizeof(Sub) / sizeof(E));
    if constexpr (std::is_array_v<Sub>)
      return SharedView<Sub>(a_, at, dim_ + 1);
    else
      return SharedRef<E>(a_, at);
  }

 private:
  SharedArrayInfo* a_;
  size_t first_;
  int dim_;
};

template <typename A>
SharedView<A> shared_array(const void* tag, const char* name) {
  static_assert(std::is_array_v<A> && std::extent_v<A> > 0, "DP_SHARED needs a sized array, e.g. [256]");
  static_assert(std::rank_v<A> <= 4, "DP_SHARED arrays have at most 4 dimensions");
  using E = std::remove_all_extents_t<A>;
  static_assert(std::is_trivially_copyable_v<E>, "shared memory holds trivially copyable elements");
  constexpr size_t extents[4] = {std::extent_v<A, 0>, std::extent_v<A, 1>, std::extent_v<A, 2>, std::extent_v<A, 3>};
  SharedArrayInfo& a = shared_storage(tag, name, sizeof(A), sizeof(E), alignof(E), extents, std::rank_v<A>);
  return SharedView<A>(&a, 0, 0);
}

// The launch's dynamic shared memory (16-byte aligned; nullptr when the launch asked for none).
template <typename T>
T* dynamic_shared() {
  return reinterpret_cast<T*>(running_block("dynamic shared memory").dynamic_shared());
}

}  // namespace dp::emu
