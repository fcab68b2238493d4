// defines: Bucket and assign_buckets, the pure function that cuts the flat gradient arena into
// the Reducer's buckets.
//
// Buckets are contiguous slices of the arena, filled from the last parameter backwards (the order
// backward produces gradients): the first about first_cap elements (so communication starts
// early), then about cap elements each (PyTorch DDP's bucket_cap_mb and its smaller first bucket).
#pragma once
#include <cstdint>
#include <vector>

namespace dp {

struct Bucket {
  int64_t begin = 0, end = 0;  // element range in the flat gradient arena
  std::vector<int> slots;      // arena slots in it, in the order their gradients arrive
};

// slot_numel: element counts of the arena's slots, in arena order. A slot is never split; a
// bucket closes once it holds at least its cap (first_cap for the first, cap after).
std::vector<Bucket> assign_buckets(const std::vector<int64_t>& slot_numel, int64_t first_cap, int64_t cap);

}  // namespace dp
