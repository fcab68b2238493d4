#include "launch/batch_feed.h"

#include <algorithm>
#include <utility>

#include "launch/synthetic_input.h"

namespace dp::launch {

int64_t feed_host_batches(int workers) { return data::loader_depth(kFeedPrefetch, workers) + 1; }

BatchFeed::BatchFeed(const data::Dataset& ds, std::vector<int64_t> order, int64_t batch_size, bool drop_last,
                     const data::Transform& transform, uint64_t seed, uint64_t epoch, DeviceInput* input,
                     int workers)
    : input_(input), epoch_(epoch) {
  loader_.emplace(ds, std::move(order), static_cast<int>(batch_size), drop_last, transform, seed, epoch,
                  kFeedPrefetch, input ? data::raw_format_of(ds) : data::host_format_of(ds), workers);
  if (input_) pull();  // the first batch starts its way to the device now
}

BatchFeed::BatchFeed(std::vector<int64_t> order, int64_t batch_size, bool drop_last, SyntheticInput* synth)
    : synth_(synth), batch_size_(batch_size) {
  DP_CHECK(synth_ != nullptr && batch_size >= 1, "batch feed: synthetic input {}, batch {}", synth_ != nullptr,
           batch_size);
  const auto n = static_cast<int64_t>(order.size());
  end_ = drop_last ? n / batch_size * batch_size : n;
  synth_->set_order(order);
}

BatchFeed::~BatchFeed() = default;

bool BatchFeed::next(Item& out) {
  if (synth_) return next_synthetic(out);
  if (!input_) {
    data::Batch b;
    if (!loader_->next(b)) return false;
    out.x = b.x;
    out.y = b.y;
    out.y_host = b.y;
    out.n = b.x.dim(0);
    return true;
  }
  return next_device(out);
}

bool BatchFeed::next_synthetic(Item& out) {
  if (rows_ >= end_) return false;
  const int64_t rows = std::min(batch_size_, end_ - rows_);
  SyntheticInput::Batch b = synth_->make(rows_, rows);
  rows_ += rows;
  out.x = b.x;
  out.y = b.y;
  out.y_host = b.y_host;
  out.n = rows;
  return true;
}

}  // namespace dp::launch
