// defines: the launch shape of an element-wise pass, pure and host-only (tested without a GPU):
// VecSplit / vec_split, how n elements split into a scalar head, a body of 16-byte vectors and a
// scalar tail given the pointers' alignments; and pass_blocks, the grid of a grid-stride loop
// from the device's SM count.
//
// Why: an element-wise kernel is bound by memory, and a GPU moves memory fastest in 16-byte
// accesses (one LDG.128 / STG.128 per thread instead of four). Such an access must be 16-byte
// aligned, but the parameter arena packs tensors without padding (runtime/arena.h), so a slot
// may start at any multiple of its element size: the pass first runs the few elements before the
// next vector boundary one by one, then whole vectors, then the rest one by one. Every pointer of
// a pass must reach that boundary after the same number of elements (the same phase); when they
// do not (say an f32 x at offset 1 and y at offset 2), the whole pass is scalar. Each element is
// computed by the same code either way, so the results do not depend on the split.
//
// C++17: the .cu files that use it are compiled by nvcc as C++17 (kernels/CMakeLists.txt).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace dp::kernels::cuda {

inline constexpr size_t kVecBytes = 16;  // one 128-bit load or store
// Resident 256-thread blocks per SM on sm_80/sm_90 (2048 threads): one full wave of blocks keeps
// every SM's memory pipeline busy; more blocks only add scheduling.
inline constexpr int kBlocksPerSm = 8;

// Elements per vector for a pass whose widest element has `widest_element_bytes` (f32: 4, then a
// 16-bit operand of the same pass moves 8 bytes per vector; 16-bit only: 8).
constexpr int vec_width(size_t widest_element_bytes) {
  return widest_element_bytes == 0 || widest_element_bytes > kVecBytes
             ? 1
             : static_cast<int>(kVecBytes / widest_element_bytes);
}

// One pointer of a pass and its element size; a null pointer (an optional operand) is ignored.
struct VecOperand {
  const void* ptr = nullptr;
  size_t elem_bytes = 0;
};

// Elements [0, head) one by one, then `vectors` vectors of `width` elements, then the tail
// [head + vectors * width, n) one by one.
struct VecSplit {
  int64_t head = 0;
  int64_t vectors = 0;
  int width = 1;
  int64_t tail(int64_t n) const { return n - head - vectors * width; }
  // Iterations of the grid-stride loops: one per vector and one per scalar element.
  int64_t items(int64_t n) const { return vectors + (n - vectors * width); }
};

namespace detail {
// Folds one operand into the common phase (-1: none yet); false when it cannot be vectorised
// with the others (misaligned for its element, or another phase).
inline bool fold_phase(int64_t& phase, const void* ptr, size_t elem_bytes, int width) {
  if (ptr == nullptr) return true;
  const auto addr = reinterpret_cast<uintptr_t>(ptr);
  if (elem_bytes == 0 || addr % elem_bytes != 0) return false;
  const auto p = static_cast<int64_t>((addr / elem_bytes) % static_cast<uintptr_t>(width));
  if (phase >= 0 && p != phase) return false;
  phase = p;
  return true;
}
inline VecSplit split_at_phase(int64_t n, int width, int64_t phase) {
  VecSplit s;
  s.width = width;
  if (phase < 0) return s;  // no operand: nothing to align
  s.head = std::min<int64_t>(n, (width - phase) % width);
  s.vectors = (n - s.head) / width;
  return s;
}
}  // namespace detail

// The split of a pass over n elements with vectors of `width` elements (a power of two; 1: all
// scalar). Vectorised when every non-null operand is aligned to its element size and all reach a
// width * elem_bytes boundary after the same number of elements; else all scalar (head 0,
// vectors 0).
inline VecSplit vec_split(int64_t n, int width, std::initializer_list<VecOperand> ops) {
  int64_t phase = -1;
  bool ok = n > 0 && width > 1;
  for (const VecOperand& op : ops) ok = ok && detail::fold_phase(phase, op.ptr, op.elem_bytes, width);
  return detail::split_at_phase(n, width, ok ? phase : -1);
}
// The same for operands that all have elements of `elem_bytes`.
inline VecSplit vec_split(int64_t n, int width, size_t elem_bytes, std::initializer_list<const void*> ptrs) {
  int64_t phase = -1;
  bool ok = n > 0 && width > 1;
  for (const void* p : ptrs) ok = ok && detail::fold_phase(phase, p, elem_bytes, width);
  return detail::split_at_phase(n, width, ok ? phase : -1);
}

// Blocks of `threads` for a grid-stride loop of `items` iterations on a device with `sm_count`
// SMs: enough for one iteration per thread, at most kBlocksPerSm per SM (the loop does the rest),
// at least 1.
inline unsigned pass_blocks(int64_t items, int sm_count, int threads = 256) {
  const int64_t cap = int64_t{std::max(sm_count, 1)} * kBlocksPerSm;
  return static_cast<unsigned>(std::clamp<int64_t>((items + threads - 1) / threads, 1, cap));
}

}  // namespace dp::kernels::cuda
