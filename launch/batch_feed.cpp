#include "launch/batch_feed.h"

#include <utility>

#include "launch/gpu_run.h"

#ifdef DPTRAIN_HAVE_CUDA
#include "launch/device_input.h"
#endif

namespace dp::launch {

BatchFeed::BatchFeed(const data::Dataset& ds, std::vector<int64_t> order, int64_t batch_size, bool drop_last,
                     const data::Transform& transform, uint64_t seed, uint64_t epoch, DeviceInput* input)
    : loader_(ds, std::move(order), static_cast<int>(batch_size), drop_last, transform, seed, epoch, /*prefetch=*/3,
              input ? data::raw_format_of(ds) : data::BatchFormat::Transformed),
      input_(input),
      epoch_(epoch) {
  if (input_) pull();  // the first batch starts its way to the device now
}

BatchFeed::~BatchFeed() = default;

bool BatchFeed::next(Item& out) {
  if (!input_) {
    data::Batch b;
    if (!loader_.next(b)) return false;
    out.x = b.x;
    out.y = b.y;
    out.y_host = b.y;
    out.n = b.x.dim(0);
    return true;
  }
#ifdef DPTRAIN_HAVE_CUDA
  if (pending_labels_.empty()) return false;
  DeviceInput::DeviceBatch d = input_->next();  // the compute stream waits for its copy
  out.x = d.x;
  out.y = d.y;
  out.y_host = std::move(pending_labels_.front());
  pending_labels_.pop_front();
  out.n = d.size;
  pull();  // the next batch's copy overlaps this batch's compute
  return true;
#else
  return false;
#endif
}

#ifdef DPTRAIN_HAVE_CUDA

void DeviceInputDeleter::operator()(DeviceInput* p) const { delete p; }

DeviceInputPtr make_device_input(GpuRun& gpu, const data::Transform& transform, const data::Dataset& ds,
                                 int64_t max_batch, uint64_t seed) {
  const DType raw = data::raw_format_of(ds) == data::BatchFormat::RawU8 ? DType::U8 : DType::F32;
  return DeviceInputPtr(new DeviceInput(*gpu.exec(), transform, ds.sample_shape(), max_batch, gpu.compute(),
                                        gpu.channels_last(), seed, raw));
}

bool BatchFeed::pull() {
  if (ended_) return false;
  if (!loader_.next(host_)) {
    ended_ = true;
    return false;
  }
  // submit() copies the batch into pinned memory before it returns, so host_ can be reused.
  input_->submit(host_, epoch_);
  pending_labels_.push_back(host_.y.clone());
  return true;
}

#else

void DeviceInputDeleter::operator()(DeviceInput*) const {}

DeviceInputPtr make_device_input(GpuRun&, const data::Transform&, const data::Dataset&, int64_t, uint64_t) {
  throw DpError("the GPU input pipeline needs a CUDA build");
}

bool BatchFeed::pull() { return false; }

#endif

}  // namespace dp::launch
