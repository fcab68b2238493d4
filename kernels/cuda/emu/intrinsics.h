// defines: the arithmetic and bit intrinsics of the emulation build — the IEEE round-to-nearest
// _rn family (__fadd_rn, __fmul_rn, __fmaf_rn, __dadd_rn, ...), integer high products, bit
// reinterpretations, population count and friends, the device math names (fminf, expf,
// isfinite, ... from <math.h>) and __ldg.
//
// An _rn intrinsic is one correctly rounded IEEE operation, which is what a host float or double
// operation is (x86-64 SSE2, round to nearest even) — provided the compiler does not contract a
// multiply and an add into one fma: the emulation build compiles with -ffp-contract=off.
#pragma once
#include <math.h>

#include <cmath>
#include <cstdint>
#include <cstring>

inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __dsqrt_rn(double a) { return std::sqrt(a); }
inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
inline float __saturatef(float a) { return a != a ? 0.0f : a < 0.0f ? 0.0f : a > 1.0f ? 1.0f : a; }

inline unsigned __umulhi(unsigned a, unsigned b) { return static_cast<unsigned>((uint64_t{a} * b) >> 32); }
inline int __mulhi(int a, int b) { return static_cast<int>((int64_t{a} * b) >> 32); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return static_cast<unsigned long long>((static_cast<unsigned __int128>(a) * b) >> 64);
}

namespace dp::emu {
template <typename To, typename From>
To bits_as(From v) {
  static_assert(sizeof(To) == sizeof(From));
  To out;
  std::memcpy(&out, &v, sizeof(To));
  return out;
}
}  // namespace dp::emu

inline int __float_as_int(float v) { return dp::emu::bits_as<int>(v); }
inline unsigned __float_as_uint(float v) { return dp::emu::bits_as<unsigned>(v); }
inline float __int_as_float(int v) { return dp::emu::bits_as<float>(v); }
inline float __uint_as_float(unsigned v) { return dp::emu::bits_as<float>(v); }
inline long long __double_as_longlong(double v) { return dp::emu::bits_as<long long>(v); }
inline double __longlong_as_double(long long v) { return dp::emu::bits_as<double>(v); }

inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
inline int __clz(int v) { return v == 0 ? 32 : __builtin_clz(static_cast<unsigned>(v)); }
inline int __clzll(long long v) { return v == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(v)); }
inline int __ffs(int v) { return __builtin_ffs(v); }
inline int __ffsll(long long v) { return __builtin_ffsll(v); }
inline unsigned __brev(unsigned v) {
  v = ((v >> 1) & 0x55555555u) | ((v & 0x55555555u) << 1);
  v = ((v >> 2) & 0x33333333u) | ((v & 0x33333333u) << 2);
  v = ((v >> 4) & 0x0F0F0F0Fu) | ((v & 0x0F0F0F0Fu) << 4);
  v = ((v >> 8) & 0x00FF00FFu) | ((v & 0x00FF00FFu) << 8);
  return (v >> 16) | (v << 16);
}

// CUDA's device min/max overloads (host code has only std::min/max).
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long min(long a, long b) { return a < b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }
inline unsigned long min(unsigned long a, unsigned long b) { return a < b ? a : b; }
inline unsigned long max(unsigned long a, unsigned long b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }

// A load through the read-only cache: a plain load here.
template <typename T>
T __ldg(const T* p) {
  return *p;
}
