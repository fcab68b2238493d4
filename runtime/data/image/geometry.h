// defines: the geometry of torchvision's image transforms as pure functions of the image size —
// CropBox and random_resized_crop_box (RandomResizedCrop.get_params), resized_size (Resize with
// an int: the shorter side), center_crop_offset (CenterCrop) — and SamplePlan, what one sample
// reads and resizes: the JPEG scale to decode at and the two axis plans of the resize
// (runtime/data/image/resample.h), for RandomResizedCrop(size) or Resize(resize) + CenterCrop(size).
//
// Reduced-size decoding (PIL's Image.draft): a JPEG can be decoded at 1/2, 1/4 or 1/8 of its size
// by its DCT, far faster for large images. A plan uses the smallest such size that still leaves the
// region to resize at least as many pixels per side as the output has, so the resize still only
// shrinks; the pixels then differ slightly from a full decode + resize (docs/data.md gives the
// measured difference), which is why it can be turned off (data.decode_scaled).
#pragma once
#include <utility>

#include "base/rng.h"
#include "runtime/data/image/resample.h"

namespace dp::data::image {

struct CropBox {
  int top = 0, left = 0, height = 0, width = 0;
  bool operator==(const CropBox&) const = default;
};

// RandomResizedCrop.get_params(img, scale, ratio), with the draws from rng: up to 10 tries of an
// area fraction uniform in [scale_lo, scale_hi) and a log-uniform aspect ratio, w = round(sqrt(a *
// r)), h = round(sqrt(a / r)) (Python's round), kept when it fits, at a uniform position; else the
// centred crop of the whole image clamped to the ratio range.
CropBox random_resized_crop_box(int height, int width, double scale_lo, double scale_hi, double ratio_lo,
                                double ratio_hi, Rng& rng);

// Resize(size) with an int: the shorter side becomes size, the longer int(size * long / short).
// Returns (height, width).
std::pair<int, int> resized_size(int height, int width, int size);

// CenterCrop's offset along one axis: int(round((in - out) / 2.0)), Python's round (half to even).
int center_crop_offset(int in, int out);

// How one sample is made from an image of (height, width): decode at 1/scale_denom, then resize
// with plans x and y, in the coordinates of the decoded (reduced) image.
struct SamplePlan {
  int scale_denom = 1;
  AxisPlan x, y;
};

// The size libjpeg gives an axis of `n` pixels decoded at 1/denom: ceil(n / denom).
inline int scaled_extent(int n, int denom) { return (n + denom - 1) / denom; }

// RandomResizedCrop: `box` resized to size x size. max_denom: the largest reduction allowed (1:
// none; PNGs and data.decode_scaled = false).
SamplePlan plan_resized_crop(int height, int width, const CropBox& box, int size, int max_denom);

// Resize(resize) + CenterCrop(size), resize >= size: only the kept outputs are computed.
SamplePlan plan_resize_center_crop(int height, int width, int resize, int size, int max_denom);

// The source pixels a plan's axis reads, [first, last) in decoded-image coordinates.
std::pair<int, int> source_span(const AxisPlan& p);

}  // namespace dp::data::image
