// defines: BatchFeed, where the trainer and the evaluation take their batches from: on the CPU
// the loader's batches as they are (transformed on the host); on a GPU the loader hands out raw
// samples and DeviceInput copies them host->device on the data stream and augments them on the
// device, one batch ahead, so the next batch's copy overlaps this batch's compute; or, for
// synthetic data made on the GPU (data.synthetic_device = "cuda"), SyntheticInput's batches, with
// no loader at all.
#pragma once
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "runtime/data/loader.h"
#include "runtime/data/transform.h"

namespace dp::launch {

class DeviceInput;
class GpuRun;
class SyntheticInput;

// The run's DeviceInput for `transform` on gpu's device: batches of up to max_batch samples of
// ds, raw from the loader (bytes for a byte data set), in gpu's compute dtype and layout.
struct DeviceInputDeleter {
  void operator()(DeviceInput* p) const;
};
using DeviceInputPtr = std::unique_ptr<DeviceInput, DeviceInputDeleter>;
DeviceInputPtr make_device_input(GpuRun& gpu, const data::Transform& transform, const data::Dataset& ds,
                                 int64_t max_batch, uint64_t seed);

// The batches the feed's loader makes ahead of the step (data::Loader's prefetch), so that loading
// overlaps the step's compute.
inline constexpr int kFeedPrefetch = 3;
// The host batches a loader-fed BatchFeed holds during a step with `workers` loader threads: the
// loader's (data::loader_depth of kFeedPrefetch) and the one the step is on. (For a moment at each
// next() there is one more: the step's previous input, which the graph keeps until its next
// forward, beside a batch the loader starts in the room the handed-out one left.) Pure.
int64_t feed_host_batches(int workers);

class BatchFeed {
 public:
  // input: null on the CPU; on a GPU the run's DeviceInput for `transform` (the loader then hands out raw batches and
  // applies no transform: the device does; image data sets are still decoded and cropped on the host).
  // workers: the loader's threads (launch/datasets.h loader_workers).
  BatchFeed(const data::Dataset& ds, std::vector<int64_t> order, int64_t batch_size, bool drop_last,
            const data::Transform& transform, uint64_t seed, uint64_t epoch, DeviceInput* input, int workers = 1);
  // The batches of `order` (data set indices) made by `synth` on the GPU, in batches of
  // batch_size (the last shorter one kept unless drop_last), as the loader would cut them. synth
  // must outlive this; it is given the order now.
  BatchFeed(std::vector<int64_t> order, int64_t batch_size, bool drop_last, SyntheticInput* synth);
  ~BatchFeed();

  struct Item {
    Tensor x;       // model input: f32 on the CPU; compute dtype (and layout) on the GPU; token windows:
                    // i32 (n, T) token ids on the model's device
    Tensor y;       // i32 labels (n), on the model's device; token windows: i32 (n, T) targets
    Tensor y_host;  // the same labels on the CPU (metrics); undefined for token windows on a GPU
    int64_t n = 0;  // samples (token windows: windows, each of T positions)
  };
  // The next batch, or false at the end of the order.
  bool next(Item& out);
  // Seconds next() waited for the loader so far (the data-loading stall; 0 without a loader).
  double wait_seconds() const { return loader_ ? loader_->wait_seconds() : 0.0; }
  // Blocks until the loader holds every batch it makes ahead (data::Loader::wait_ahead_allocated;
  // nothing without a loader): the memory report's moment.
  void wait_ahead_allocated() {
    if (loader_) loader_->wait_ahead_allocated();
  }

 private:
  // The GPU side (batch_feed_cuda.cpp): the next batch from the DeviceInput; pull() loads the
  // next host batch and submits it to the DeviceInput.
  bool next_device(Item& out);
  bool pull();
  // SyntheticInput's next batch (rows_ of the order taken so far).
  bool next_synthetic(Item& out);
  std::optional<data::Loader> loader_;  // absent for SyntheticInput's batches
  DeviceInput* input_ = nullptr;
  SyntheticInput* synth_ = nullptr;
  int64_t rows_ = 0, end_ = 0, batch_size_ = 0;
  uint64_t epoch_ = 0;
  data::Batch host_;
  bool ended_ = false;
  std::deque<Tensor> pending_labels_;  // host labels of the batches submitted to the device
};

}  // namespace dp::launch
