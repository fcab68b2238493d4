// The Reducer's GPU path (collectives/reducer/reducer.h): events between the compute and comm streams,
// 16-bit wire casts on the comm stream, zeros for unused parameters on compute.
#include "collectives/reducer/reducer.h"

#include "kernels/cuda/cast.h"
#include "runtime/cuda/exec_context.h"
#include "runtime/cuda/stream.h"
#include "runtime/cuda/check.h"

namespace dp {

struct Reducer::Gpu {
  cuda::ExecContext* ctx;
  std::vector<cuda::CudaEvent> ready;  // per bucket: recorded on compute once its backward is enqueued
  cuda::CudaEvent reduced;             // recorded on comm after the last bucket's result
};

void Reducer::init_gpu() {
  const Device dev = graph_.grads().flat().device();
  DP_CHECK(dev == Device::cuda(opt_.gpu->device()),
           "reducer: the gradient arena is {} but the GPU path runs on cuda:{} (build the model on that device)",
           graph_.grads().flat().describe(), opt_.gpu->device());
  CHECK_CUDA(cudaSetDevice(opt_.gpu->device()));
  gpu_.emplace();
  gpu_->ctx = opt_.gpu;
  for (size_t b = 0; b < buckets_.size(); ++b) gpu_->ready.emplace_back(/*timing=*/false);
  gpu_->reduced = cuda::CudaEvent(/*timing=*/false);
}

// Bucket b's backward is enqueued on compute: comm waits for it on the device (the host goes on
// enqueuing backward), casts it for the wire if asked, and hands it to the backend in comm's
// order.
void Reducer::launch_gpu(size_t b) {
  const Bucket& bk = buckets_[b];
  const int64_t n = bk.end - bk.begin;
  const Tensor grads = graph_.grads().flat().slice_flat(bk.begin, {n});
  cudaStream_t compute = gpu_->ctx->compute(), comm = gpu_->ctx->comm();
  gpu_->ready[b].record(compute);
  CHECK_CUDA(cudaStreamWaitEvent(comm, gpu_->ready[b].get(), 0));
  if (opt_.shard) {  // ZeRO: block rank() of the bucket holds the average afterwards
    works_[b] = comm_.reduce_scatter_blocks_stream_async(grads, ReduceOp::Avg, comm);
    return;
  }
  if (opt_.wire == DType::F32) {
    works_[b] = comm_.allreduce_stream_async(grads, ReduceOp::Avg, comm);
    return;
  }
  auto* wire = static_cast<uint16_t*>(wire_[b].raw());
  const float* src = grads.data<float>();
  if (opt_.wire == DType::BF16) CHECK_CUDA(kernels::cuda::f32_to_bf16(wire, src, n, comm));
  else CHECK_CUDA(kernels::cuda::f32_to_f16(wire, src, n, comm));
  works_[b] = comm_.allreduce_stream_async(wire_[b], ReduceOp::Avg, comm);
}

// allow_unused: the slots that got no gradient this step reduce as zeros, written on compute
// before their buckets' ready events are recorded.
void Reducer::zero_unused_gpu() {
  const Tensor& flat = graph_.grads().flat();
  for (size_t s = 0; s < ready_.size(); ++s) {
    if (ready_[s]) continue;
    const auto& slot = graph_.grads().slot(static_cast<int>(s));
    if (slot.numel == 0) continue;
    const Tensor t = flat.slice_flat(slot.offset, {slot.numel});
    CHECK_CUDA(cudaMemsetAsync(t.raw(), 0, t.nbytes(), gpu_->ctx->compute()));
  }
}

// Every bucket is launched (and, for host-completing backends, waited for). comm waits for the
// device-native backend's stream, widens 16-bit buckets back into the arena, and compute waits
// for comm: the optimizer enqueued next sees the averages.
void Reducer::finish_gpu() {
  cudaStream_t compute = gpu_->ctx->compute(), comm = gpu_->ctx->comm();
  comm_.stream_wait_collectives(comm);
  if (opt_.wire != DType::F32)
    for (size_t b = 0; b < buckets_.size(); ++b) {
      const int64_t n = buckets_[b].end - buckets_[b].begin;
      float* dst = graph_.grads().flat().slice_flat(buckets_[b].begin, {n}).data<float>();
      const auto* wire = static_cast<const uint16_t*>(wire_[b].raw());
      if (opt_.wire == DType::BF16) CHECK_CUDA(kernels::cuda::bf16_to_f32(dst, wire, n, comm));
      else CHECK_CUDA(kernels::cuda::f16_to_f32(dst, wire, n, comm));
    }
  gpu_->reduced.record(comm);
  CHECK_CUDA(cudaStreamWaitEvent(compute, gpu_->reduced.get(), 0));
}

}  // namespace dp
