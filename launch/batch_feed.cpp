#include "launch/batch_feed.h"

#include <utility>

namespace dp::launch {

BatchFeed::BatchFeed(const data::Dataset& ds, std::vector<int64_t> order, int64_t batch_size, bool drop_last,
                     const data::Transform& transform, uint64_t seed, uint64_t epoch, DeviceInput* input,
                     int workers)
    : loader_(ds, std::move(order), static_cast<int>(batch_size), drop_last, transform, seed, epoch, /*prefetch=*/3,
              input ? data::raw_format_of(ds) : data::host_format_of(ds), workers),
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
  return next_device(out);
}

}  // namespace dp::launch
