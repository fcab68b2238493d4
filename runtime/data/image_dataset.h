// defines: ImageDataset, the base of the data sets of encoded images (a folder of images:
// image_folder.h; tar shards: tar_shards.h): a list of samples (a name and a label each) whose
// bytes a subclass reads; every sample is decoded and cropped on demand into (3, S, S) bytes
// (runtime/data/image/sample.h), S = data.image_size.
//
// get_u8 applies the crop it is given (training: RandomResizedCrop, its draws from
// keyed_rng(seed, kStreamCrop, index, epoch)), get() the data set's own evaluation crop
// (Resize + CenterCrop). A sample that cannot be decoded is a UserError naming its file, unless
// skip_bad: then it is replaced by the next sample that decodes (so every batch keeps its size and
// every rank its step count), logged once, and counted (bad_samples()).
#pragma once
#include <atomic>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "runtime/data/dataset.h"

namespace dp::data {

struct ImageOptions {
  image::ImageCrop eval_crop;  // what get() applies: Resize(resize) + CenterCrop(size)
  bool skip_bad = false;
};

class ImageDataset : public Dataset {
 public:
  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  Shape sample_shape() const override { return {3, options_.eval_crop.size, options_.eval_crop.size}; }
  int num_classes() const override { return static_cast<int>(classes_.size()); }
  std::vector<std::string> class_names() const override { return classes_; }
  bool labeled() const override { return labeled_; }
  int32_t get(int64_t index, float* out) const override;
  bool holds_bytes() const override { return true; }
  int32_t get_u8(int64_t index, const SampleKey& key, uint8_t* out) const override;

  // Samples replaced so far because they could not be decoded (data.skip_bad).
  int64_t bad_samples() const { return bad_count_.load(); }

 protected:
  ImageDataset(ImageOptions options, std::vector<std::string> classes, std::vector<int32_t> labels, bool labeled);
  // The encoded bytes of sample `index` (thread-safe). Throws UserError naming it on a read error.
  virtual std::vector<uint8_t> read(int64_t index) const = 0;

 private:
  int32_t make(int64_t index, const SampleKey& key, uint8_t* out) const;
  int32_t replace_bad(int64_t index, const SampleKey& key, uint8_t* out, const std::string& why) const;
  bool note_bad(int64_t index, const std::string& why) const;  // false: known already
  bool known_bad(int64_t index) const;

  ImageOptions options_;
  std::vector<std::string> classes_;
  std::vector<int32_t> labels_;  // (n); -1 when unlabeled
  bool labeled_;
  mutable std::mutex bad_mu_;
  mutable std::set<int64_t> bad_;  // guarded by bad_mu_
  mutable std::atomic<int64_t> bad_count_{0};
};

}  // namespace dp::data
