#include "runtime/data/image/geometry.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace dp::data::image {
namespace {

// Python's round() to an int: half to even (nearbyint under the default rounding mode).
int py_round(double v) { return static_cast<int>(std::nearbyint(v)); }

// The largest reduction d in {8, 4, 2} (at most max_denom) that keeps `extent / d >= need` on both
// axes, else 1.
int pick_denom(double extent_y, double extent_x, int need_y, int need_x, int max_denom) {
  for (int d = 8; d >= 2; d /= 2)
    if (d <= max_denom && extent_y / d >= need_y && extent_x / d >= need_x) return d;
  return 1;
}

// The window [lo, hi) of source pixels (at 1/denom) that holds [first, first + extent) of the full
// image, and the box inside it.
AxisPlan window_axis(int full, int first, int extent, int denom, int out_size) {
  const int n = scaled_extent(full, denom);
  AxisPlan p;
  p.origin = first / denom;
  const int end = std::min(n, scaled_extent(first + extent, denom));
  p.in_size = end - p.origin;
  // Exact in float: denom is a power of two and the coordinates are below 2^24.
  p.in0 = static_cast<float>(static_cast<double>(first) / denom - p.origin);
  p.in1 = static_cast<float>(static_cast<double>(first + extent) / denom - p.origin);
  p.out_size = out_size;
  p.out_first = 0;
  p.out_count = out_size;
  return p;
}

}  // namespace

CropBox random_resized_crop_box(int height, int width, double scale_lo, double scale_hi, double ratio_lo,
                                double ratio_hi, Rng& rng) {
  DP_CHECK(height > 0 && width > 0, "image of {}x{} pixels", width, height);
  const double area = static_cast<double>(height) * width;
  const double log_lo = std::log(ratio_lo), log_hi = std::log(ratio_hi);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rng.uniform(scale_lo, scale_hi);
    const double aspect = std::exp(rng.uniform(log_lo, log_hi));
    const int w = py_round(std::sqrt(target_area * aspect));
    const int h = py_round(std::sqrt(target_area / aspect));
    if (0 < w && w <= width && 0 < h && h <= height) {
      CropBox b;
      b.top = static_cast<int>(rng.below(static_cast<uint64_t>(height - h + 1)));
      b.left = static_cast<int>(rng.below(static_cast<uint64_t>(width - w + 1)));
      b.height = h, b.width = w;
      return b;
    }
  }
  // Fallback to the central crop, the aspect ratio clamped into [ratio_lo, ratio_hi].
  const double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < ratio_lo) h = py_round(w / ratio_lo);
  else if (in_ratio > ratio_hi) w = py_round(h * ratio_hi);
  return CropBox{(height - h) / 2, (width - w) / 2, h, w};
}

std::pair<int, int> resized_size(int height, int width, int size) {
  const bool portrait = height >= width;
  const int shorter = portrait ? width : height, longer = portrait ? height : width;
  // torchvision: new_long = int(size * long / short), computed in doubles.
  const int new_long = static_cast<int>(static_cast<double>(size) * longer / shorter);
  return portrait ? std::pair{new_long, size} : std::pair{size, new_long};
}

int center_crop_offset(int in, int out) { return py_round((in - out) / 2.0); }

SamplePlan plan_resized_crop(int height, int width, const CropBox& box, int size, int max_denom) {
  DP_CHECK(box.top >= 0 && box.left >= 0 && box.height > 0 && box.width > 0 && box.top + box.height <= height &&
               box.left + box.width <= width,
           "crop box {}x{} at ({}, {}) outside the {}x{} image", box.width, box.height, box.left, box.top, width,
           height);
  SamplePlan s;
  s.scale_denom = pick_denom(box.height, box.width, size, size, max_denom);
  s.y = window_axis(height, box.top, box.height, s.scale_denom, size);
  s.x = window_axis(width, box.left, box.width, s.scale_denom, size);
  return s;
}

SamplePlan plan_resize_center_crop(int height, int width, int resize, int size, int max_denom) {
  DP_CHECK(resize >= size, "resize {} smaller than the crop {}", resize, size);
  const auto [rh, rw] = resized_size(height, width, resize);
  SamplePlan s;
  s.scale_denom = pick_denom(height, width, rh, rw, max_denom);
  s.y = window_axis(height, 0, height, s.scale_denom, rh);
  s.x = window_axis(width, 0, width, s.scale_denom, rw);
  s.y.out_first = center_crop_offset(rh, size), s.y.out_count = size;
  s.x.out_first = center_crop_offset(rw, size), s.x.out_count = size;
  return s;
}

std::pair<int, int> source_span(const AxisPlan& p) {
  const AxisCoeffs c = axis_coeffs(p);
  if (p.out_count == 0) return {p.origin, p.origin};
  return {p.origin + c.first.front(), p.origin + c.first.back() + c.taps.back()};
}

}  // namespace dp::data::image
