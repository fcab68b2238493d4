// defines: Arena, one flat allocation holding many named tensors as views.
//
// All parameters live in one arena and all gradients in another with the same layout, so the
// reducer can all-reduce contiguous slices (buckets) of the gradient arena without copies and
// the optimizer can update everything with one fused pass.
#pragma once
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace dp {

// Where an arena's flat storage lives: Allocated (Tensor::zeros, any device) or Paged (the host,
// on a page mapping of its own, Tensor::zeros_paged: its pages can be given back; ZeRO stage 2's
// gradient arena).
enum class ArenaMemory { Allocated, Paged };

class Arena {
 public:
  struct Slot {
    std::string name;
    Shape shape;
    int64_t offset = 0;  // in elements from the arena's start
    int64_t numel = 0;
  };

  // Reserve a slot; returns its index. Only before allocate().
  int add(const std::string& name, const Shape& shape);
  // Allocate the flat storage (zero-filled). Paged: on the host only.
  void allocate(DType dtype, Device device, ArenaMemory memory = ArenaMemory::Allocated);
  // Allocate another arena with exactly this layout (e.g. gradients for parameters).
  Arena like(DType dtype, Device device, ArenaMemory memory = ArenaMemory::Allocated) const;

  bool allocated() const { return flat_.defined(); }
  int size() const { return static_cast<int>(slots_.size()); }
  const Slot& slot(int i) const { return slots_.at(i); }
  const std::vector<Slot>& slots() const { return slots_; }
  Tensor tensor(int i) const;          // view of slot i
  const Tensor& flat() const { return flat_; }  // the whole arena, 1-D
  int64_t numel() const { return total_; }

 private:
  std::vector<Slot> slots_;
  int64_t total_ = 0;
  Tensor flat_;
};

}  // namespace dp
