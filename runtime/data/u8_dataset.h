// defines: U8Dataset, an in-memory dataset of 8-bit pixels and integer labels (what IDX,
// CIFAR-10 and u8 .npy files hold). Pixels stay as bytes (a quarter of the float size) and are scaled to
// [0, 1] on get(), as torchvision's ToTensor does: float(byte) / 255.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/data/dataset.h"

namespace dp::data {

class U8Dataset : public Dataset {
 public:
  // pixels: (n, numel(sample_shape)) bytes, row-major; labels: (n), each in [0, num_classes).
  U8Dataset(std::vector<uint8_t> pixels, std::vector<uint8_t> labels, Shape sample_shape, int num_classes,
            std::string description);
  U8Dataset(std::vector<uint8_t> pixels, std::vector<int32_t> labels, Shape sample_shape, int num_classes,
            std::string description);

  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  Shape sample_shape() const override { return shape_; }
  int num_classes() const override { return num_classes_; }
  int32_t get(int64_t index, float* out) const override;
  std::string describe() const override;
  bool holds_bytes() const override { return true; }
  int32_t get_u8(int64_t index, const SampleKey& key, uint8_t* out) const override;

  // The raw bytes of one sample, for tests and tools.
  const uint8_t* raw(int64_t index) const;

 private:
  std::vector<uint8_t> pixels_;  // (n, numel)
  std::vector<int32_t> labels_;  // (n)
  Shape shape_;
  int64_t numel_;
  int num_classes_;
  std::string description_;
};

}  // namespace dp::data
