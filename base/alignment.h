// defines: address_alignment, the largest power of two, at most a cap, that divides an address
// (or every address of a list): what a library's algorithm choice depends on when it may assume
// aligned operands. The one computation behind cuDNN's graph keys (cap 16, runtime/cuda/
// graph_plan_key.h byte_alignment), the legacy convolution keys (cap 256, conv_algos.h) and
// cuBLASLt's (cap 256, lt_matmul.h): each of those only names its library's cap.
#pragma once
#include <cstdint>
#include <initializer_list>

namespace dp {

// `cap` is a power of two. A null pointer (an operand that is absent) constrains nothing: cap.
inline int64_t address_alignment(std::initializer_list<const void*> ptrs, int64_t cap) {
  int64_t a = cap;
  for (const void* p : ptrs) {
    const auto v = reinterpret_cast<uintptr_t>(p);
    while (a > 1 && v % static_cast<uintptr_t>(a) != 0) a /= 2;
  }
  return a;
}

inline int64_t address_alignment(const void* p, int64_t cap) { return address_alignment({p}, cap); }

}  // namespace dp
