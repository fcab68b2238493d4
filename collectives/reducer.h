// defines: assign_buckets (pure) and Reducer, the bucketed gradient all-reduce overlapped with
// backward (PyTorch DDP's Reducer, in small: prepare -> gradient ready -> bucket ready -> finalize).
//
// Buckets are contiguous slices of the flat gradient arena, filled from the last parameter
// backwards (the order backward produces gradients): the first about first_bucket elements (so
// communication starts early), then about bucket elements each. A bucket is all-reduced
// (average) as soon as every parameter in it has its gradient, while backward goes on; on the
// CPU the ring backend's communication thread carries it.
#pragma once
#include <chrono>
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

struct ReducerOptions {
  int64_t first_bucket_bytes = 1'000'000;
  int64_t bucket_bytes = 25'000'000;
  bool overlap = true;         // false: every bucket is reduced after backward (for comparison)
  bool allow_unused = false;   // true: a parameter without a gradient this step reduces as zeros
  // F32: gradients travel as they are. BF16/F16: each bucket is rounded to 16 bits, averaged in
  // that dtype by the backend (which sums 16-bit floats in f32) and widened back.
  DType wire = DType::F32;
};

// Where a step's communication time went: the bucket all-reduces' time on the wire (the
// backend runs them in issue order), and the part of it backward did not hide (the time
// finalize() waited).
struct ReducerStepTimes {
  struct Span {
    int bucket;
    std::chrono::steady_clock::time_point begin, end;
  };
  std::vector<Span> buckets;  // in completion order
  double comm_s = 0;          // total time on the wire
  double exposed_s = 0;       // finalize()'s wait
};

class Reducer {
 public:
  Reducer(Communicator& comm, Graph& graph, const ReducerOptions& options);
  void prepare();             // before backward
  void on_ready(int node);    // Graph::backward's hook: node's parameter gradients are written
  // After backward: reduce what is left, wait for every bucket. Throws naming the parameters
  // that got no gradient (unless allow_unused).
  void finalize();
  const std::vector<Bucket>& buckets() const { return buckets_; }
  const ReducerStepTimes& last_step() const { return times_; }

 private:
  void launch(size_t b);
  Communicator& comm_;
  Graph& graph_;
  ReducerOptions opt_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_slot_;
  std::vector<int> pending_;   // per bucket: slots still without a gradient this step
  std::vector<char> ready_;    // per slot: gradient written this step
  std::vector<WorkPtr> works_;
  std::vector<Tensor> wire_;   // per bucket: the 16-bit copy that travels (compression only)
  ReducerStepTimes times_;
};

}  // namespace dp
