// defines: assign_buckets (pure) and Reducer, the bucketed gradient all-reduce overlapped with
// backward (PyTorch DDP's Reducer, in small: prepare -> gradient ready -> bucket ready -> finalize).
//
// Buckets are contiguous slices of the flat gradient arena, filled from the last parameter
// backwards (the order backward produces gradients): the first about first_bucket elements (so
// communication starts early), then about bucket elements each. A bucket is all-reduced
// (average) as soon as every parameter in it has its gradient, while backward goes on; on the
// CPU the ring backend's communication thread carries it.
#pragma once
#include <cstdint>
#include <vector>

#include "collectives/communicator.h"
#include "runtime/graph.h"

namespace dp {

struct Bucket {
  int64_t begin = 0, end = 0;  // element range in the flat gradient arena
  std::vector<int> slots;      // arena slots in it, in the order their gradients arrive
};

// slot_numel: element counts of the arena's slots, in arena order. A slot is never split; a
// bucket closes once it holds at least its cap (first_cap for the first, cap after).
std::vector<Bucket> assign_buckets(const std::vector<int64_t>& slot_numel, int64_t first_cap, int64_t cap);

class Reducer {
 public:
  // overlap = false: every bucket is reduced after backward (for comparison).
  Reducer(Communicator& comm, Graph& graph, int64_t first_bucket_bytes, int64_t bucket_bytes, bool overlap);
  void prepare();             // before backward
  void on_ready(int node);    // Graph::backward's hook: node's parameter gradients are written
  void finalize();            // after backward: reduce what is left, wait for every bucket
  const std::vector<Bucket>& buckets() const { return buckets_; }

 private:
  void launch(size_t b);
  Communicator& comm_;
  Graph& graph_;
  bool overlap_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_slot_;
  std::vector<int> pending_;   // per bucket: slots still without a gradient this step
  std::vector<char> ready_;    // per slot: gradient written this step
  std::vector<WorkPtr> works_;
};

}  // namespace dp
