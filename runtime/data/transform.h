// defines: Transform (per-sample augmentation and normalisation) and apply_transform, its CPU
// implementation, in torchvision's order: RandomCrop(padding) -> RandomHorizontalFlip -> Normalize.
// Image data sets first make each sample with the transform's crop (RandomResizedCrop or
// Resize + CenterCrop, runtime/data/image/sample.h); the rest then applies to its (3, S, S) pixels.
//
// Random choices come from keyed_rng(seed, kStreamAugment, id = sample index, epoch): the same
// sample in the same epoch gets the same crop and flip whatever the thread, batch or rank.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/data/image/sample.h"
#include "runtime/tensor.h"

namespace dp::data {

struct Transform {
  std::vector<float> mean, std;  // per channel; both empty = no normalisation
  int crop_padding = 0;          // pad each side with zeros by this many pixels, crop back to (H, W)
  bool hflip = false;            // mirror left-right with probability 0.5
  // Image data sets: the crop that makes each sample from its image, before the above
  // (RandomResizedCrop for training, Resize + CenterCrop for evaluation); unset: the data set's
  // own. Other data sets ignore it.
  std::optional<image::ImageCrop> crop;

  bool is_identity() const { return mean.empty() && crop_padding == 0 && !hflip; }
};

// Throws UserError when `t` does not fit samples of `sample_shape`: mean/std not one per
// channel, std <= 0, or crop/flip on a sample that is not (C, H, W).
void check_transform(const Transform& t, const Shape& sample_shape);

// The normalisation as the device kernels take it: f32 (2, C) on `device`, row 0 the means,
// row 1 the standard deviations; an undefined Tensor when `t` does not normalise.
Tensor normalisation_table(const Transform& t, Device device);

// in, out: (C, H, W) floats, distinct buffers. Normalisation: out = (x - mean[c]) / std[c],
// applied after padding, so padded pixels become (0 - mean[c]) / std[c] as in torchvision.
void apply_transform(const Transform& t, const Shape& sample_shape, uint64_t seed, uint64_t epoch, int64_t index,
                     const float* in, float* out);

// The random choices apply_transform makes for one sample (exposed for tests).
struct AugmentChoice {
  int dy = 0, dx = 0;  // crop origin in the padded image, each in [0, 2 * crop_padding]
  bool flip = false;
};
AugmentChoice augment_choice(const Transform& t, uint64_t seed, uint64_t epoch, int64_t index);

// The choices of n samples `indices`, packed as the device augmentation takes them
// (kernels/cuda/augment.h): out (n, 3) int32, row r = {dy, dx, flip ? 1 : 0} of
// augment_choice(t, seed, epoch, indices[r]).
inline constexpr int kPackedChoiceInts = 3;
void pack_augment_choices(const Transform& t, uint64_t seed, uint64_t epoch, const int64_t* indices, int64_t n,
                          int32_t* out);

}  // namespace dp::data
