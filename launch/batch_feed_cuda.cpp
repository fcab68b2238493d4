// BatchFeed's GPU side (launch/batch_feed.h): batches through the run's DeviceInput.
#include "launch/batch_feed.h"

#include <utility>

#include "launch/device_input.h"
#include "launch/gpu_run.h"

namespace dp::launch {

bool BatchFeed::next_device(Item& out) {
  if (pending_labels_.empty()) return false;
  DeviceInput::DeviceBatch d = input_->next();  // the compute stream waits for its copy
  out.x = d.x;
  out.y = d.y;
  out.y_host = std::move(pending_labels_.front());
  pending_labels_.pop_front();
  out.n = d.size;
  pull();  // the next batch's copy overlaps this batch's compute
  return true;
}

void DeviceInputDeleter::operator()(DeviceInput* p) const { delete p; }

DeviceInputPtr make_device_input(GpuRun& gpu, const data::Transform& transform, const data::Dataset& ds,
                                 int64_t max_batch, uint64_t seed) {
  if (ds.holds_tokens()) return DeviceInputPtr(new DeviceInput(*gpu.exec(), ds.sample_numel(), max_batch));
  const DType raw = data::raw_format_of(ds) == data::BatchFormat::RawU8 ? DType::U8 : DType::F32;
  return DeviceInputPtr(new DeviceInput(*gpu.exec(), transform, ds.sample_shape(), max_batch, gpu.compute(),
                                        gpu.channels_last(), seed, raw));
}

bool BatchFeed::pull() {
  if (ended_) return false;
  if (!loader_->next(host_)) {
    ended_ = true;
    return false;
  }
  // submit() copies the batch into pinned memory before it returns, so host_ can be reused.
  input_->submit(host_, epoch_);
  pending_labels_.push_back(host_.y.defined() ? host_.y.clone() : Tensor());  // token windows: targets on the device only
  return true;
}

}  // namespace dp::launch
