#include "runtime/data/transform.h"

#include <cstring>

#include "runtime/data/keyed_rng.h"

namespace dp::data {

Tensor normalisation_table(const Transform& t, Device device) {
  if (t.mean.empty()) return Tensor();
  DP_CHECK(t.std.size() == t.mean.size(), "normalisation with {} means and {} standard deviations", t.mean.size(),
           t.std.size());
  const int64_t c = static_cast<int64_t>(t.mean.size());
  Tensor host = Tensor::zeros({2, c}, DType::F32);
  std::memcpy(host.data<float>(), t.mean.data(), static_cast<size_t>(c) * sizeof(float));
  std::memcpy(host.data<float>() + c, t.std.data(), static_cast<size_t>(c) * sizeof(float));
  if (device.is_cpu()) return host;
  Tensor table = Tensor::zeros({2, c}, DType::F32, device);
  table.copy_from(host);
  return table;
}

void check_transform(const Transform& t, const Shape& shape) {
  if (t.mean.size() != t.std.size())
    DP_THROW_USER("normalisation has {} means but {} standard deviations, expected one of each per channel",
                  t.mean.size(), t.std.size());
  if (!t.mean.empty()) {
    const int64_t channels = shape.empty() ? 1 : shape[0];
    if (static_cast<int64_t>(t.mean.size()) != channels)
      DP_THROW_USER("normalisation has {} means, expected {} (one per channel of samples {})", t.mean.size(),
                    channels, shape_str(shape));
    for (size_t c = 0; c < t.std.size(); ++c)
      if (!(t.std[c] > 0.0f)) DP_THROW_USER("normalisation std[{}] = {}, expected > 0", c, t.std[c]);
  }
  if (t.crop_padding < 0) DP_THROW_USER("crop padding {} < 0", t.crop_padding);
  if ((t.crop_padding > 0 || t.hflip) && shape.size() != 3)
    DP_THROW_USER("random crop and flip need (C, H, W) samples, got {}", shape_str(shape));
}

AugmentChoice augment_choice(const Transform& t, uint64_t seed, uint64_t epoch, int64_t index) {
  AugmentChoice a;
  if (t.crop_padding == 0 && !t.hflip) return a;
  Rng rng = keyed_rng(seed, kStreamAugment, static_cast<uint64_t>(index), epoch);
  // Always draw the coin first, so that the flips do not depend on the crop padding and the
  // crops do not depend on whether flipping is on.
  const bool coin = (rng.next_u32() >> 31) != 0;
  const uint64_t span = 2 * static_cast<uint64_t>(t.crop_padding) + 1;
  a.dy = static_cast<int>(rng.below(span));
  a.dx = static_cast<int>(rng.below(span));
  a.flip = t.hflip && coin;
  return a;
}

void pack_augment_choices(const Transform& t, uint64_t seed, uint64_t epoch, const int64_t* indices, int64_t n,
                          int32_t* out) {
  for (int64_t r = 0; r < n; ++r) {
    const AugmentChoice a = augment_choice(t, seed, epoch, indices[r]);
    out[r * kPackedChoiceInts + 0] = a.dy;
    out[r * kPackedChoiceInts + 1] = a.dx;
    out[r * kPackedChoiceInts + 2] = a.flip ? 1 : 0;
  }
}

void apply_transform(const Transform& t, const Shape& shape, uint64_t seed, uint64_t epoch, int64_t index,
                     const float* in, float* out) {
  const int64_t numel = shape_numel(shape);
  if (t.crop_padding == 0 && !t.hflip) {
    for (int64_t j = 0; j < numel; ++j) out[j] = in[j];
  } else {
    const int64_t C = shape[0], H = shape[1], W = shape[2];
    const AugmentChoice a = augment_choice(t, seed, epoch, index);
    const int64_t oy = a.dy - t.crop_padding, ox = a.dx - t.crop_padding;  // source offset of output (0, 0)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t y = 0; y < H; ++y) {
        const int64_t sy = y + oy;
        float* orow = out + (c * H + y) * W;
        for (int64_t x = 0; x < W; ++x) {
          // Flip after crop: output column x shows cropped column W-1-x.
          const int64_t sx = (a.flip ? W - 1 - x : x) + ox;
          orow[x] = (sy >= 0 && sy < H && sx >= 0 && sx < W) ? in[(c * H + sy) * W + sx] : 0.0f;
        }
      }
  }
  if (!t.mean.empty()) {
    const int64_t C = static_cast<int64_t>(t.mean.size()), plane = numel / C;
    for (int64_t c = 0; c < C; ++c) {
      const float m = t.mean[c], s = t.std[c];
      float* p = out + c * plane;
      for (int64_t j = 0; j < plane; ++j) p[j] = (p[j] - m) / s;
    }
  }
}

}  // namespace dp::data
