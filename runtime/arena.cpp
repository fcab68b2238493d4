#include "runtime/arena.h"

namespace dp {

int Arena::add(const std::string& name, const Shape& shape) {
  DP_CHECK(!allocated(), "arena already allocated; cannot add '{}'", name);
  Slot s{name, shape, total_, shape_numel(shape)};
  // Slots are packed back to back: buckets are contiguous ranges and the optimizer sees one
  // vector. No padding, so the arena is exactly the parameter count.
  total_ += s.numel;
  slots_.push_back(std::move(s));
  return static_cast<int>(slots_.size()) - 1;
}

void Arena::allocate(DType dtype, Device device, ArenaMemory memory) {
  DP_CHECK(!allocated(), "arena allocated twice");
  DP_CHECK(memory == ArenaMemory::Allocated || device.is_cpu(), "a paged arena lives on the host, not {}",
           device.str());
  flat_ = memory == ArenaMemory::Paged ? Tensor::zeros_paged({total_}, dtype) : Tensor::zeros({total_}, dtype, device);
}

Arena Arena::like(DType dtype, Device device, ArenaMemory memory) const {
  Arena a;
  a.slots_ = slots_;
  a.total_ = total_;
  a.allocate(dtype, device, memory);
  return a;
}

Tensor Arena::tensor(int i) const {
  DP_CHECK(allocated(), "arena not allocated");
  const Slot& s = slots_.at(i);
  return flat_.slice_flat(s.offset, s.shape);
}

}  // namespace dp
