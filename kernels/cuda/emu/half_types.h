// defines: __half and __nv_bfloat16 (and half, nv_bfloat16) for the emulation build, with the
// conversions the kernels use: __float2half_rn, __half2float, __float2bfloat16_rn,
// __bfloat162float and the bit reinterpretations (__half_as_ushort, __ushort_as_bfloat16, ...).
//
// Finite values and infinities round to nearest even with the same algorithm as the CPU twins
// (base/half.h). A NaN becomes 0x7FFF, the canonical NaN a GPU's cvt.rn.f16.f32 and
// cvt.rn.bf16.f32 produce (the CPU twins keep sign and payload): the emulator behaves like the
// device, so a test comparing NaN bits with a CPU twin fails here as it would on a GPU.
// Arithmetic on these types goes through float (implicit conversions), as the kernels do anyway.
#pragma once
#include <cstdint>

#include "base/half.h"

struct __half_raw {
  unsigned short x;
};
struct __nv_bfloat16_raw {
  unsigned short x;
};

struct __half {
  unsigned short __x;
  __half() = default;
  __half(float f);
  __half(__half_raw r) : __x(r.x) {}
  operator float() const;
  operator __half_raw() const { return __half_raw{__x}; }
};

struct __nv_bfloat16 {
  unsigned short __x;
  __nv_bfloat16() = default;
  __nv_bfloat16(float f);
  __nv_bfloat16(__nv_bfloat16_raw r) : __x(r.x) {}
  operator float() const;
  operator __nv_bfloat16_raw() const { return __nv_bfloat16_raw{__x}; }
};

typedef __half half;
typedef __nv_bfloat16 nv_bfloat16;

inline __half __ushort_as_half(unsigned short u) { return __half(__half_raw{u}); }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __half __short_as_half(short s) { return __ushort_as_half(static_cast<unsigned short>(s)); }
inline short __half_as_short(__half h) { return static_cast<short>(h.__x); }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { return __nv_bfloat16(__nv_bfloat16_raw{u}); }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
inline __nv_bfloat16 __short_as_bfloat16(short s) { return __ushort_as_bfloat16(static_cast<unsigned short>(s)); }
inline short __bfloat16_as_short(__nv_bfloat16 h) { return static_cast<short>(h.__x); }

inline __half __float2half_rn(float f) {
  return __ushort_as_half(f != f ? 0x7FFF : dp::kernels::cpu::f32_to_f16(f));
}
inline __half __float2half(float f) { return __float2half_rn(f); }
inline float __half2float(__half h) { return dp::kernels::cpu::f16_to_f32(h.__x); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  return __ushort_as_bfloat16(f != f ? 0x7FFF : dp::kernels::cpu::f32_to_bf16(f));
}
inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
inline float __bfloat162float(__nv_bfloat16 h) { return dp::kernels::cpu::bf16_to_f32(h.__x); }

inline bool __hisnan(__half h) { return (h.__x & 0x7FFF) > 0x7C00; }
inline bool __hisnan(__nv_bfloat16 h) { return (h.__x & 0x7FFF) > 0x7F80; }

inline __half::__half(float f) : __x(__float2half_rn(f).__x) {}
inline __half::operator float() const { return __half2float(*this); }
inline __nv_bfloat16::__nv_bfloat16(float f) : __x(__float2bfloat16_rn(f).__x) {}
inline __nv_bfloat16::operator float() const { return __bfloat162float(*this); }
