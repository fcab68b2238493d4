#include "runtime/data/image_dataset.h"

#include "runtime/data/keyed_rng.h"
#include "runtime/log.h"

namespace dp::data {

ImageDataset::ImageDataset(ImageOptions options, std::vector<std::string> classes, std::vector<int32_t> labels,
                           bool labeled)
    : options_(std::move(options)), classes_(std::move(classes)), labels_(std::move(labels)), labeled_(labeled) {}

int32_t ImageDataset::get(int64_t index, float* out) const {
  const int64_t n = sample_numel();
  std::vector<uint8_t> bytes(static_cast<size_t>(n));
  const int32_t label = get_u8(index, SampleKey{}, bytes.data());
  // Division, not multiplication by 1/255: torchvision's ToTensor, as U8Dataset::get.
  for (int64_t j = 0; j < n; ++j) out[j] = static_cast<float>(bytes[j]) / 255.0f;
  return label;
}

int32_t ImageDataset::get_u8(int64_t index, const SampleKey& key, uint8_t* out) const {
  DP_CHECK(index >= 0 && index < size(), "sample index {} out of range [0, {}) in {}", index, size(), describe());
  try {
    return make(index, key, out);
  } catch (const UserError& e) {
    if (!options_.skip_bad) throw;
    return replace_bad(index, key, out, e.what());
  }
}

int32_t ImageDataset::make(int64_t index, const SampleKey& key, uint8_t* out) const {
  const image::ImageCrop& crop = key.crop ? *key.crop : options_.eval_crop;
  DP_CHECK(crop.size == options_.eval_crop.size, "crop to {} pixels for a data set of {}-pixel samples", crop.size,
           options_.eval_crop.size);
  const std::vector<uint8_t> bytes = read(index);
  Rng rng = keyed_rng(key.seed, kStreamCrop, static_cast<uint64_t>(index), key.epoch);
  image::make_sample(bytes.data(), bytes.size(), sample_name(index), crop, &rng, out);
  return labels_[index];
}

bool ImageDataset::note_bad(int64_t index, const std::string& why) const {
  std::lock_guard<std::mutex> lock(bad_mu_);
  if (!bad_.insert(index).second) return false;
  ++bad_count_;
  log::get("data")->warn("skipping a bad sample (data.skip_bad = true): {}", why);
  return true;
}

bool ImageDataset::known_bad(int64_t index) const {
  std::lock_guard<std::mutex> lock(bad_mu_);
  return bad_.count(index) != 0;
}

// The next sample after `index` (cyclically) that decodes stands in for it, cropped with its own
// keys: the same replacement in every run.
int32_t ImageDataset::replace_bad(int64_t index, const SampleKey& key, uint8_t* out, const std::string& why) const {
  note_bad(index, why);
  const int64_t n = size();
  for (int64_t k = 1; k < n; ++k) {
    const int64_t other = (index + k) % n;
    if (known_bad(other)) continue;
    try {
      return make(other, key, out);
    } catch (const UserError& e) {
      note_bad(other, e.what());
    }
  }
  DP_THROW_USER("{}: no sample can be decoded (data.skip_bad = true skipped all {}); the first error: {}", describe(),
                n, why);
}

}  // namespace dp::data
