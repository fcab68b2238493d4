// defines: CUDA's atomic read-modify-write functions for the emulation build (atomicAdd, Sub,
// Exch, Min, Max, Inc, Dec, CAS, And, Or, Xor on int, unsigned, unsigned long long, and
// atomicAdd on float and double), each returning the old value as CUDA's do.
//
// One host thread runs a whole grid, so atomicity among a launch's threads is automatic; the
// operations still use std::atomic_ref so that two host threads running kernels on the same
// memory (two streams driven from two threads) stay race-free, as on a GPU. Atomics on DP_SHARED
// arrays are not supported (their elements are proxies); the project's kernels use none.
#pragma once
#include <atomic>

namespace dp::emu {
template <typename T, typename F>
T atomic_update(T* p, F f) {
  std::atomic_ref<T> a(*p);
  T old = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(old, f(old), std::memory_order_relaxed)) {
  }
  return old;
}
}  // namespace dp::emu

inline int atomicAdd(int* p, int v) { return std::atomic_ref<int>(*p).fetch_add(v, std::memory_order_relaxed); }
inline unsigned atomicAdd(unsigned* p, unsigned v) {
  return std::atomic_ref<unsigned>(*p).fetch_add(v, std::memory_order_relaxed);
}
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  return std::atomic_ref<unsigned long long>(*p).fetch_add(v, std::memory_order_relaxed);
}
// Float and double adds round once per add, in the order the threads run (a GPU's order varies).
inline float atomicAdd(float* p, float v) {
  return dp::emu::atomic_update(p, [v](float o) { return o + v; });
}
inline double atomicAdd(double* p, double v) {
  return dp::emu::atomic_update(p, [v](double o) { return o + v; });
}
inline int atomicSub(int* p, int v) { return std::atomic_ref<int>(*p).fetch_sub(v, std::memory_order_relaxed); }
inline unsigned atomicSub(unsigned* p, unsigned v) {
  return std::atomic_ref<unsigned>(*p).fetch_sub(v, std::memory_order_relaxed);
}

template <typename T>
T atomicExch(T* p, T v) {
  return std::atomic_ref<T>(*p).exchange(v, std::memory_order_relaxed);
}
template <typename T>
T atomicCAS(T* p, T compare, T v) {
  std::atomic_ref<T>(*p).compare_exchange_strong(compare, v, std::memory_order_relaxed);
  return compare;  // the old value, whether or not it was replaced
}
template <typename T>
T atomicMin(T* p, T v) {
  return dp::emu::atomic_update(p, [v](T o) { return v < o ? v : o; });
}
template <typename T>
T atomicMax(T* p, T v) {
  return dp::emu::atomic_update(p, [v](T o) { return v > o ? v : o; });
}
template <typename T>
T atomicAnd(T* p, T v) {
  return std::atomic_ref<T>(*p).fetch_and(v, std::memory_order_relaxed);
}
template <typename T>
T atomicOr(T* p, T v) {
  return std::atomic_ref<T>(*p).fetch_or(v, std::memory_order_relaxed);
}
template <typename T>
T atomicXor(T* p, T v) {
  return std::atomic_ref<T>(*p).fetch_xor(v, std::memory_order_relaxed);
}
// ((old >= limit) ? 0 : old + 1) and ((old == 0 || old > limit) ? limit : old - 1), as CUDA's.
inline unsigned atomicInc(unsigned* p, unsigned limit) {
  return dp::emu::atomic_update(p, [limit](unsigned o) { return o >= limit ? 0u : o + 1; });
}
inline unsigned atomicDec(unsigned* p, unsigned limit) {
  return dp::emu::atomic_update(p, [limit](unsigned o) { return (o == 0 || o > limit) ? limit : o - 1; });
}
