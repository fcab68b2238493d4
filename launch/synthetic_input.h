// defines: SyntheticInput, the training batches of data.dataset = "synthetic" made on the GPU
// (data.synthetic_device = "cuda"): the inputs that do not hide the GPU's speed, as PyTorch's
// benchmarks keep theirs resident on the device. Per epoch the sample order is uploaded once
// (one device-synchronous copy); per batch two kernels on the compute stream
// (kernels/cuda/synthetic.h) write the labels and the inputs, in the compute dtype and layout,
// with the values the CPU loader and the input pipeline would give (bit for bit, normalisation
// included): no loader thread, no host-to-device copy, no host wait. The host computes the
// batch's labels too (one Philox block each, kernels/synthetic_math.h), for the accuracy counts.
// For a model that takes tokens (SyntheticSpec::tokens) a batch is token windows instead: one
// kernel writes the inputs x i32 (B, T) and the targets y i32 (B, T), the CPU data set's windows
// (runtime/data/synthetic_tokens.cpp) split as the input pipeline splits token shards' windows;
// the targets stay on the device (no host labels, as for token batches on a GPU: batch_feed.h).
//
// The batch it hands out lives in its one buffer until the next make(): the next batch is
// written by the compute stream after the work queued on the previous one, so one buffer is
// enough. Declared in every build; without CUDA the constructor throws (never reached: the
// run is on the CPU there).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "launch/datasets.h"
#include "runtime/data/transform.h"
#include "runtime/tensor.h"

namespace dp::cuda {
class ExecContext;
}

namespace dp::launch {

class SyntheticInput {
 public:
  // gpu must outlive this. spec: the data set's generator; t: its transform (normalisation only:
  // crop and flip are refused with a UserError; token windows take none at all); batches of up to
  // max_batch rows in `compute` (F32, BF16, F16; token ids are i32 whatever it is), channels last
  // for (C, H, W) samples when channels_last. Allocates its buffers now.
  SyntheticInput(cuda::ExecContext& gpu, const SyntheticSpec& spec, const data::Transform& t, int64_t max_batch,
                 DType compute, bool channels_last);
  ~SyntheticInput();
  SyntheticInput(const SyntheticInput&) = delete;
  SyntheticInput& operator=(const SyntheticInput&) = delete;

  // The epoch's samples (data set indices, each below 2^55) in the order the batches take them.
  void set_order(const std::vector<int64_t>& order);

  struct Batch {
    Tensor x;       // (B, *sample) compute dtype on the device (NHWC storage when channels last);
                    // token windows: i32 (B, T) inputs
    Tensor y;       // i32 (B) on the device; token windows: i32 (B, T) targets
    Tensor y_host;  // the same labels on the CPU; undefined for token windows
  };
  // Samples order[first, first + rows) (1 <= rows <= max_batch), enqueued on the compute stream.
  Batch make(int64_t first, int64_t rows);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dp::launch
