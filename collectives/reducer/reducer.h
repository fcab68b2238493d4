// defines: Reducer, the bucketed gradient all-reduce overlapped with
// backward (PyTorch DDP's Reducer, in small: prepare -> gradient ready -> bucket ready -> finalize).
//
// Buckets (collectives/reducer/buckets.h, a pure function) are contiguous slices of the flat
// gradient arena, filled from the last parameter backwards. A bucket is all-reduced
// (average) as soon as every parameter in it has its gradient, while backward goes on; on the
// CPU the ring backend's communication thread carries it.
//
// On the GPU (ReducerOptions::gpu set; the gradient arena on that device), on_ready(node) means
// "node's backward is enqueued on gpu->compute()", not "it has run". A complete bucket:
//   1. an event recorded on compute; gpu->comm() waits for it (cudaStreamWaitEvent: the host
//      thread goes on enqueuing backward);
//   2. with wire compression, f32 -> bf16/f16 on comm (kernels/cuda/cast.h) into a device copy;
//   3. Communicator::allreduce_stream_async(bucket, Avg, comm) (ZeRO: reduce_scatter_blocks_
//      stream_async, the same way): nccl waits for comm on its own
//      stream and runs ncclAllReduce (ncclAvg) there; the ring copies the bucket to pinned host
//      memory on comm, its communication thread waits for that copy (an event), reduces on the
//      host and copies back (its own stream, synchronised before the Work completes).
// finalize(): unused parameters (allow_unused) are zeroed on compute (cudaMemsetAsync) before
// their buckets go; then the host waits for the Works (ring, single) or nothing (nccl: comm
// waits for nccl's stream instead); 16-bit buckets are widened on comm; compute waits for an
// event recorded on comm. The optimizer step enqueued on compute after finalize() sees the
// averaged gradients. Step times are measured on the host as on the CPU (with nccl, finalize
// does not wait: last_step() holds the buckets already complete then, and exposed_s is 0; a
// bucket that failed later throws from the next prepare(), which waits for the last step's).
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "base/pimpl_ptr.h"
#include "collectives/communicator.h"
#include "collectives/reducer/buckets.h"
#include "runtime/graph.h"

namespace dp {

namespace cuda {
class ExecContext;  // runtime/cuda/exec_context.h (CUDA builds)
}

struct ReducerOptions {
  int64_t first_bucket_bytes = 1'000'000;
  int64_t bucket_bytes = 25'000'000;
  bool overlap = true;         // false: every bucket is reduced after backward (for comparison)
  bool allow_unused = false;   // true: a parameter without a gradient this step reduces as zeros
  // F32: gradients travel as they are. BF16/F16: each bucket is rounded to 16 bits, averaged in
  // that dtype by the backend (which sums 16-bit floats in f32) and widened back.
  DType wire = DType::F32;
  // ZeRO (train.zero = 1, 2; collectives/reducer/zero_shard.h): each bucket is reduce-scattered in
  // place instead (Communicator::reduce_scatter_blocks_async): only this rank's block of every
  // bucket (shard_layout.h) holds the average afterwards, the rest is undefined. F32 wire; on the
  // GPU path by Communicator::reduce_scatter_blocks_stream_async on comm, as the all-reduce goes.
  bool shard = false;
  // Set: called with each bucket's index once its reduction is complete (its Work done), once per
  // step, on the thread that drives the Reducer: polled at every on_ready (so a bucket is reported
  // while backward goes on, at the end of the layer during which it completed), and in finalize
  // for the rest, after the wait. F32 wire on the CPU path only. ZeRO stage 2 gives the bucket's
  // foreign pages back here (ZeroShard::release_grads).
  std::function<void(int bucket)> on_reduced;
  // Set: the gradients live on gpu->device() and backward is enqueued on gpu->compute() (the GPU
  // path above; CUDA builds only). Not owned; outlives the Reducer.
  cuda::ExecContext* gpu = nullptr;
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

// The buckets a Reducer with these options cuts the graph's gradient arena into (ZeRO's shard
// layout is made from the same, before the Reducer exists).
std::vector<Bucket> reducer_buckets(const Graph& graph, const ReducerOptions& options);

class Reducer {
 public:
  Reducer(Communicator& comm, Graph& graph, const ReducerOptions& options);
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;
  void prepare();             // before backward
  void on_ready(int node);    // Graph::backward's hook: node's parameter gradients are written
  // After backward: reduce what is left, wait for every bucket. Throws naming the parameters
  // that got no gradient (unless allow_unused).
  void finalize();
  const std::vector<Bucket>& buckets() const { return buckets_; }
  const ReducerStepTimes& last_step() const { return times_; }

 private:
  struct Gpu;  // the GPU path's events (reducer_cuda.cpp)
  void launch(size_t b);
  void init_gpu();
  void launch_gpu(size_t b);
  void zero_unused_gpu();             // allow_unused: the slots without a gradient, on compute
  void finish_gpu();                  // finalize's end on the GPU path: widen, order compute after
  void record_times(double exposed_s);
  void report_reduced(bool all);      // on_reduced for completed buckets not yet reported (all: every one)
  Communicator& comm_;
  Graph& graph_;
  ReducerOptions opt_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_slot_;
  std::vector<int> pending_;   // per bucket: slots still without a gradient this step
  std::vector<char> ready_;    // per slot: gradient written this step
  std::vector<WorkPtr> works_;
  std::vector<char> reported_;  // per bucket: on_reduced called this step
  std::vector<Tensor> wire_;   // per bucket: the 16-bit copy that travels (compression only; on the GPU
                               // path on the device)
  PimplPtr<Gpu> gpu_;          // set on the GPU path
  ReducerStepTimes times_;
};

}  // namespace dp
