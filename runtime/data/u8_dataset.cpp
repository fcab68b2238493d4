#include "runtime/data/u8_dataset.h"

#include <cstring>

namespace dp::data {

U8Dataset::U8Dataset(std::vector<uint8_t> pixels, std::vector<uint8_t> labels, Shape sample_shape,
                     int num_classes, std::string description)
    : U8Dataset(std::move(pixels), std::vector<int32_t>(labels.begin(), labels.end()), std::move(sample_shape),
                num_classes, std::move(description)) {}

U8Dataset::U8Dataset(std::vector<uint8_t> pixels, std::vector<int32_t> labels, Shape sample_shape,
                     int num_classes, std::string description)
    : pixels_(std::move(pixels)),
      labels_(std::move(labels)),
      shape_(std::move(sample_shape)),
      numel_(shape_numel(shape_)),
      num_classes_(num_classes),
      description_(std::move(description)) {
  DP_CHECK(pixels_.size() == labels_.size() * static_cast<size_t>(numel_),
           "{} pixel bytes for {} samples of shape {}", pixels_.size(), labels_.size(), shape_str(shape_));
}

const uint8_t* U8Dataset::raw(int64_t index) const {
  DP_CHECK(index >= 0 && index < size(), "sample index {} out of range [0, {}) in {}", index, size(),
           description_);
  return pixels_.data() + index * numel_;
}

int32_t U8Dataset::get(int64_t index, float* out) const {
  const uint8_t* p = raw(index);
  // Division, not multiplication by 1/255: bitwise the same floats as torchvision's ToTensor.
  for (int64_t j = 0; j < numel_; ++j) out[j] = static_cast<float>(p[j]) / 255.0f;
  return labels_[index];
}

int32_t U8Dataset::get_u8(int64_t index, const SampleKey&, uint8_t* out) const {
  std::memcpy(out, raw(index), static_cast<size_t>(numel_));
  return labels_[index];
}

std::string U8Dataset::describe() const {
  return fmt::format("{}: {} x {}, {} classes", description_, size(), shape_str(shape_), num_classes_);
}

}  // namespace dp::data
