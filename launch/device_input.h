// defines: DeviceInput, the GPU input pipeline: raw host batches (data::Loader with a raw
// BatchFormat) packed into pinned slots, copied host -> device on the data stream while the
// current step computes, and augmented + normalised there (kernels/cuda/augment.h); and its pure
// host-side decisions (every build): SlotRing (which slot, which waits), slot_layout (where
// things lie in a slot), input_geometry (the sample as (C, H, W)).
//
// Per batch, with slot s:
//   host:    [wait copied[s] if s was filled before]  pack x, y, choices into pinned[s]
//   data:    [wait released[s] if s was handed out before]  H2D pinned[s] -> staging[s]
//            record copied[s]  augment staging[s] -> x[s]  record ready[s]
//   next():  record released[previous slot] on compute; compute waits ready[s]
// The batch next() hands out is in use by the compute stream until the following next() call,
// so its slot is written again only after the work the compute stream had queued by then.
//
// Token windows (a language model's data, data::BatchFormat::RawTokens) take the same path with
// another last step: each row's T + 1 uint16 tokens are uploaded as stored (half the bytes of the
// i32 inputs and targets) and split on the device into x i32 (B, T) and y i32 (B, T)
// (kernels/cuda/tokens.h) instead of augmented.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "runtime/data/loader.h"
#include "runtime/data/transform.h"
#include "runtime/tensor.h"

namespace dp::cuda {
class ExecContext;
}

namespace dp::launch {

// The bookkeeping of a ring of slots, each one of: free -> pending (submitted) -> in use (handed
// out by next()) -> free (at the following next()). Submits fill the slots round robin and next()
// hands them out in the same order, so the busy slots are always a run ending at the last one
// filled and a submit is possible exactly when fewer than slots() are busy.
class SlotRing {
 public:
  explicit SlotRing(int slots);  // slots >= 2, else DpError

  struct Fill {
    int slot;
    bool wait_copy;     // filled before: the host waits for that copy before writing the pinned slot
    bool wait_release;  // handed out before: the data stream waits for its release event
  };
  // Takes the next slot for a submit; DpError when every slot is pending or in use (call next()).
  Fill submit();

  struct Handout {
    int slot;      // the oldest pending slot, now in use
    int released;  // the slot in use until now (record its release event), or -1
  };
  // DpError when nothing is pending.
  Handout next();

  int slots() const { return static_cast<int>(filled_.size()); }
  int pending() const { return static_cast<int>(pending_.size()); }
  int in_use() const { return in_use_; }  // -1 before the first next()
  bool can_submit() const { return pending() + (in_use_ >= 0 ? 1 : 0) < slots(); }

 private:
  int next_fill_ = 0;
  int in_use_ = -1;
  std::deque<int> pending_;
  std::vector<bool> filled_, released_;  // per slot: ever filled, ever released
};

// Byte offsets in one slot (pinned and device alike, so one copy moves a batch):
// y (max_batch) i32 | choices (max_batch, 3) i32 | raw x (max_batch rows of raw_row_bytes);
// each region 256-byte aligned.
struct SlotLayout {
  size_t y_offset = 0, choice_offset = 0, raw_offset = 0, bytes = 0;
  // Bytes to copy for a batch of `rows`: everything up to the end of its raw rows.
  size_t upload_bytes(int64_t rows, size_t raw_row_bytes) const {
    return raw_offset + static_cast<size_t>(rows) * raw_row_bytes;
  }
};
SlotLayout slot_layout(int64_t max_batch, size_t raw_row_bytes);

// A sample shape as the augmentation's (C, H, W): a (C, H, W) sample as it is; any other shape
// (which check_transform allows only without crop and flip) as (C = shape[0], 1, numel / C),
// the channels of its normalisation; a scalar as (1, 1, 1). nhwc: channels_last and 4-D batches
// (the layers' is_channels_last), so only for (C, H, W) samples.
struct InputGeometry {
  int64_t channels = 1, height = 1, width = 1;
  bool nhwc = false;
};
InputGeometry input_geometry(const Shape& sample_shape, bool channels_last);

// The pipeline itself (device_input_cuda.cpp, CUDA builds only).
class DeviceInput {
 public:
  // gpu must outlive this. t: the training transform (as given to the CPU loader), checked
  // against sample_shape. max_batch: the most rows of a submit. compute: F32, BF16 or F16.
  // seed: the loader's seed (keys the augmentation with the epoch and the dataset index).
  // raw_dtype: U8 or F32, the largest raw sample type to expect (sizes the slots; F32 takes both).
  // slots >= 2. Allocates every buffer now (pinned and device), uploads mean/std once.
  DeviceInput(cuda::ExecContext& gpu, const data::Transform& t, const Shape& sample_shape, int64_t max_batch,
              DType compute, bool channels_last, uint64_t seed, DType raw_dtype = DType::F32, int slots = 2);
  // Token windows of block_size + 1 tokens (a Loader's RawTokens batches: x u8 (B, 2 (T + 1))),
  // handed out as x i32 (B, T) inputs and y i32 (B, T) targets on the device.
  DeviceInput(cuda::ExecContext& gpu, int64_t block_size, int64_t max_batch, int slots = 2);
  // Waits for the data stream (a submitted copy may still read the pinned slots). Never throws.
  ~DeviceInput();
  DeviceInput(const DeviceInput&) = delete;
  DeviceInput& operator=(const DeviceInput&) = delete;

  // Host: packs a raw batch (a Loader's RawU8 or RawF32 batch: x u8/f32 (B, *sample_shape) on
  // the cpu, 1 <= B <= max_batch) into the next pinned slot, uploads it on gpu.data() and runs
  // the augmentation there; returns without waiting for the device (it waits on the host only
  // for the copy of the batch that used this pinned slot before, long done in steady state).
  // epoch keys the augmentation choices. DpError when no slot is free (call next() first).
  void submit(const data::Batch& raw, uint64_t epoch);

  struct DeviceBatch {
    Tensor x;  // (B, C, H, W) compute dtype on the device, stored NHWC when channels_last (4-D);
               // token windows: i32 (B, T) inputs
    Tensor y;  // i32 (B) on the device; token windows: i32 (B, T) targets
    int64_t size = 0;
    std::vector<int64_t> indices;  // (B) dataset indices of the rows
  };
  // Makes gpu.compute() wait (no host wait) for the oldest submitted batch and returns it. The
  // batch's tensors (views of the slot) stay valid until the following next() call; the one
  // handed out before is released now (its slot may be written after the compute work queued
  // so far). DpError when nothing is pending.
  DeviceBatch next();

  int pending() const { return ring_.pending(); }
  bool can_submit() const { return ring_.can_submit(); }
  int slots() const { return ring_.slots(); }

 private:
  struct Slot;  // one slot's pinned and device buffers and its events (device_input_cuda.cpp)
  void allocate_slots(int slots);
  void check_raw(const data::Batch& raw, int64_t& rows, size_t& row_bytes) const;
  // The last step on the data stream, after the copy: augmentation, or the token split.
  void finish_on_device(Slot& s, const data::Batch& raw, int64_t rows);

  cuda::ExecContext& gpu_;
  const bool tokens_ = false;  // token windows (the second constructor)
  const data::Transform t_;
  const Shape sample_shape_;
  const int64_t max_batch_, sample_numel_;
  const DType compute_, raw_dtype_;
  const uint64_t seed_;
  const InputGeometry geo_;
  const size_t raw_row_capacity_;  // bytes per raw row in a slot: sample_numel * size(raw_dtype)
  const SlotLayout layout_;
  Tensor norm_;  // f32 (2, C) on the device: mean, std; undefined without normalisation
  std::vector<Slot> slots_;
  SlotRing ring_;
};

}  // namespace dp::launch
