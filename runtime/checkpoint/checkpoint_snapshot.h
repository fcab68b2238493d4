// defines: CheckpointSnapshot, a host copy of everything a checkpoint holds (checkpoint_tensors:
// parameters, buffers, optimizer state; the metadata: step, sampler position, seed, optimizer
// steps), taken between two steps so that the file can be written later, from a background thread
// (launch/checkpoint_saver.h), while training changes the live state.
//
// One host block holds every tensor (64-byte aligned, in checkpoint_tensors' order); it is
// allocated by the first take() and reused while the sizes stay, so a run pays for it once. On a
// GPU run the block is page-locked once (cudaHostRegister) and each device tensor is copied into
// it on the given stream (cudaMemcpyAsync, ordered after the step's kernels); take() returns once
// the stream has reached the copies: the host waits for the copy (PCIe speed), never for the file.
// write() writes the copy with write_checkpoint_tensors, the synchronous path's own writer, so
// the file is byte for byte the one write_checkpoint would have written at that step.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/checkpoint/checkpoint.h"

namespace dp {

class CheckpointSnapshot {
 public:
  // stream: the cudaStream_t the device tensors are ordered on (nullptr: a CPU run).
  void take(const Graph& model, const optim::Optimizer& opt, const CheckpointMeta& meta, void* stream = nullptr);
  // take() for an optimizer state that is never whole in one place (ZeRO's, CPU tensors): the
  // block laid out from `layout` (checkpoint_layout's), the model's tensors copied, then
  // feed(sink) hands the state a piece at a time (ZeroShard::stream_state) and the sink copies
  // each into its place. The block is what take() of the whole state would hold.
  void take_streamed(std::vector<CheckpointEntry> layout, const CheckpointMeta& meta,
                     const std::function<void(const optim::StateSink&)>& feed);
  bool taken() const { return !tensors_.empty(); }
  const CheckpointMeta& meta() const { return meta_; }
  size_t bytes() const;  // the host block's size
  // write_checkpoint_tensors(path, the copy, meta). Only after take().
  void write(const std::string& path, const std::function<void(size_t, size_t)>& after_tensor = {}) const;

 private:
  void layout(const std::vector<SafetensorsSpec>& specs);

  std::shared_ptr<Storage> block_;
  std::shared_ptr<void> pinned_;  // page-locks block_ while it lives (GPU runs)
  std::vector<std::pair<std::string, Tensor>> tensors_;  // views of block_
  CheckpointMeta meta_;
};

namespace detail {
// checkpoint_snapshot_cuda.cpp (runtime/no_cuda.cpp in a build without CUDA).
// Page-locks [p, p + bytes) until the returned owner is released (which logs a failure, never throws).
std::shared_ptr<void> pin_host_memory(void* p, size_t bytes);
// Copies each device tensor `from` into its host twin `to` on `stream`, then waits for the stream.
void copy_to_host_on_stream(const std::vector<std::pair<Tensor, Tensor>>& to_from, void* stream);
}  // namespace detail

}  // namespace dp
