#include "launch/device_input.h"

namespace dp::launch {

SlotRing::SlotRing(int slots) {
  DP_CHECK(slots >= 2, "the input pipeline needs at least 2 slots (one computing, one filling), got {}", slots);
  filled_.assign(static_cast<size_t>(slots), false);
  released_.assign(static_cast<size_t>(slots), false);
}

SlotRing::Fill SlotRing::submit() {
  DP_CHECK(can_submit(), "input pipeline: all {} slots are busy ({} submitted, {} in use); call next() first",
           slots(), pending(), in_use_ >= 0 ? 1 : 0);
  const int s = next_fill_;
  next_fill_ = (next_fill_ + 1) % slots();
  Fill f{s, filled_[s], released_[s]};
  filled_[s] = true;
  pending_.push_back(s);
  return f;
}

SlotRing::Handout SlotRing::next() {
  DP_CHECK(!pending_.empty(), "input pipeline: next() with no batch submitted");
  Handout h{pending_.front(), in_use_};
  pending_.pop_front();
  if (h.released >= 0) released_[h.released] = true;
  in_use_ = h.slot;
  return h;
}

SlotLayout slot_layout(int64_t max_batch, size_t raw_row_bytes) {
  DP_CHECK(max_batch >= 1, "input pipeline: max batch {} < 1", max_batch);
  constexpr size_t kAlign = 256;  // cudaMalloc's alignment: every region starts like an allocation
  auto up = [](size_t b) { return (b + kAlign - 1) / kAlign * kAlign; };
  const size_t rows = static_cast<size_t>(max_batch);
  SlotLayout l;
  l.y_offset = 0;
  l.choice_offset = up(rows * sizeof(int32_t));
  l.raw_offset = l.choice_offset + up(rows * data::kPackedChoiceInts * sizeof(int32_t));
  l.bytes = l.raw_offset + up(rows * raw_row_bytes);
  return l;
}

InputGeometry input_geometry(const Shape& shape, bool channels_last) {
  InputGeometry g;
  if (shape.size() == 3) {
    g.channels = shape[0], g.height = shape[1], g.width = shape[2];
    g.nhwc = channels_last;
  } else if (!shape.empty()) {
    g.channels = shape[0];
    g.width = shape_numel(shape) / shape[0];
  }
  DP_CHECK(g.channels >= 1 && g.height >= 1 && g.width >= 1, "input pipeline: sample shape {} has an empty dimension",
           shape_str(shape));
  return g;
}

}  // namespace dp::launch
