#include "runtime/data/image/resample.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "base/error.h"

namespace dp::data::image {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // Pillow's PRECISION_BITS

double bilinear_filter(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Pillow's clip8: the accumulator's integer part, clamped to [0, 255].
inline uint8_t clip8(int v) {
  const int r = v >> kPrecisionBits;
  return static_cast<uint8_t>(r < 0 ? 0 : (r > 255 ? 255 : r));
}

// Pillow skips a pass when the output equals the window (same size, box = the whole window).
bool is_identity(const AxisPlan& p) {
  return p.out_size == p.in_size && p.in0 == 0.0f && p.in1 == static_cast<float>(p.in_size);
}

}  // namespace

AxisCoeffs axis_coeffs(const AxisPlan& p) {
  DP_CHECK(p.out_size > 0 && p.in_size > 0 && p.out_first >= 0 && p.out_count >= 0 &&
               p.out_first + p.out_count <= p.out_size,
           "bad resize plan: window {} box [{}, {}) -> {} outputs, kept [{}, {})", p.in_size, p.in0, p.in1,
           p.out_size, p.out_first, p.out_first + p.out_count);
  // precompute_coeffs, line for line: the box difference in float, the rest in double.
  const double scale = static_cast<double>(p.in1 - p.in0) / p.out_size;
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = 1.0 * filterscale;  // BILINEAR's support is 1
  AxisCoeffs c;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.first.resize(p.out_count);
  c.taps.resize(p.out_count);
  c.weights.assign(static_cast<size_t>(p.out_count) * c.ksize, 0);
  std::vector<double> k(c.ksize);
  for (int j = 0; j < p.out_count; ++j) {
    const int xx = p.out_first + j;
    const double center = p.in0 + (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int xmin = static_cast<int>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > p.in_size) xmax = p.in_size;
    xmax -= xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      const double w = bilinear_filter((x + xmin - center + 0.5) * ss);
      k[x] = w;
      ww += w;
    }
    int32_t* out = c.weights.data() + static_cast<size_t>(j) * c.ksize;
    for (int x = 0; x < xmax; ++x) {
      const double v = ww != 0.0 ? k[x] / ww : k[x];
      // normalize_coeffs_8bpc: round half away from zero into fixed point.
      out[x] = v < 0 ? static_cast<int>(-0.5 + v * (1 << kPrecisionBits))
                     : static_cast<int>(0.5 + v * (1 << kPrecisionBits));
    }
    c.first[j] = xmin;
    c.taps[j] = xmax;
  }
  return c;
}

namespace {

// The source pixels [first, last) an axis reads, in the buffer's coordinates.
std::pair<int, int> read_span(const AxisPlan& p, bool copy, const AxisCoeffs& c) {
  if (copy) return {p.origin + p.out_first, p.origin + p.out_first + p.out_count};
  return {p.origin + c.first.front(), p.origin + c.first.back() + c.taps.back()};
}

// One pass along x: in (rows, in_w, 3) -> out (rows, count, 3); output j reads columns
// first[j] - shift ... of in (copy: column j + shift).
void pass_x(const uint8_t* in, int rows, int in_w, bool copy, const AxisCoeffs& c, int shift, int count,
            uint8_t* out) {
  for (int r = 0; r < rows; ++r) {
    const uint8_t* s = in + static_cast<size_t>(r) * in_w * 3;
    uint8_t* t = out + static_cast<size_t>(r) * count * 3;
    if (copy) {
      std::copy(s + shift * 3, s + (shift + count) * 3, t);
      continue;
    }
    for (int j = 0; j < count; ++j) {
      const int32_t* k = c.weights.data() + static_cast<size_t>(j) * c.ksize;
      const uint8_t* p = s + (c.first[j] - shift) * 3;
      int s0 = 1 << (kPrecisionBits - 1), s1 = s0, s2 = s0;
      for (int x = 0; x < c.taps[j]; ++x) {
        s0 += p[3 * x + 0] * k[x];
        s1 += p[3 * x + 1] * k[x];
        s2 += p[3 * x + 2] * k[x];
      }
      t[3 * j + 0] = clip8(s0);
      t[3 * j + 1] = clip8(s1);
      t[3 * j + 2] = clip8(s2);
    }
  }
}

// One pass along y: in (in_rows, cols, 3) -> out (count, cols, 3); output i reads rows
// first[i] - shift ... of in (copy: row i + shift).
void pass_y(const uint8_t* in, int cols, bool copy, const AxisCoeffs& c, int shift, int count, uint8_t* out) {
  const size_t row = static_cast<size_t>(cols) * 3;
  for (int i = 0; i < count; ++i) {
    uint8_t* t = out + i * row;
    if (copy) {
      std::copy(in + (i + shift) * row, in + (i + shift + 1) * row, t);
      continue;
    }
    const int32_t* k = c.weights.data() + static_cast<size_t>(i) * c.ksize;
    const uint8_t* base = in + (c.first[i] - shift) * row;
    for (size_t e = 0; e < row; ++e) {
      int acc = 1 << (kPrecisionBits - 1);
      const uint8_t* p = base + e;
      for (int y = 0; y < c.taps[i]; ++y, p += row) acc += *p * k[y];
      t[e] = clip8(acc);
    }
  }
}

}  // namespace

bool pillow_vertical_first(const AxisPlan& x, const AxisPlan& y) {
  const int dy = y.in_size - y.out_size, dx = x.in_size - x.out_size;
  return dy > 0 && dy > dx * 2;
}

void resample_rgb(const uint8_t* src, int height, int width, int src_stride, const AxisPlan& nx, const AxisPlan& ny,
                  uint8_t* out) {
  const int ow = nx.out_count, oh = ny.out_count;
  if (ow == 0 || oh == 0) return;
  const bool copy_x = is_identity(nx), copy_y = is_identity(ny);
  const AxisCoeffs cx = axis_coeffs(nx), cy = axis_coeffs(ny);
  const auto [sx0, sx1] = read_span(nx, copy_x, cx);
  const auto [sy0, sy1] = read_span(ny, copy_y, cy);
  // The buffer may hold only part of the image (a partial decode): what is read must be in it.
  DP_CHECK(sx0 >= 0 && sx1 <= width && sy0 >= 0 && sy1 <= height,
           "resize reads x [{}, {}) y [{}, {}) of a {}x{} buffer", sx0, sx1, sy0, sy1, width, height);
  // The block of the source both passes read, packed: (sy1 - sy0, sx1 - sx0, 3).
  const int bw = sx1 - sx0, bh = sy1 - sy0;
  std::vector<uint8_t> block(static_cast<size_t>(bw) * bh * 3);
  for (int r = 0; r < bh; ++r) {
    const uint8_t* s = src + static_cast<size_t>(sy0 + r) * src_stride + sx0 * 3;
    std::copy(s, s + bw * 3, block.data() + static_cast<size_t>(r) * bw * 3);
  }
  // Output j of x reads block column first[j] - (sx0 - origin); likewise for y.
  const int shift_x = copy_x ? nx.out_first + nx.origin - sx0 : sx0 - nx.origin;
  const int shift_y = copy_y ? ny.out_first + ny.origin - sy0 : sy0 - ny.origin;
  std::vector<uint8_t> tmp, hwc(static_cast<size_t>(oh) * ow * 3);
  if (pillow_vertical_first(nx, ny)) {
    tmp.resize(static_cast<size_t>(oh) * bw * 3);
    pass_y(block.data(), bw, copy_y, cy, shift_y, oh, tmp.data());
    pass_x(tmp.data(), oh, bw, copy_x, cx, shift_x, ow, hwc.data());
  } else {
    tmp.resize(static_cast<size_t>(bh) * ow * 3);
    pass_x(block.data(), bh, bw, copy_x, cx, shift_x, ow, tmp.data());
    pass_y(tmp.data(), ow, copy_y, cy, shift_y, oh, hwc.data());
  }
  // (oh, ow, 3) -> three planes.
  const size_t plane = static_cast<size_t>(oh) * ow;
  for (size_t i = 0; i < plane; ++i) {
    out[i] = hwc[3 * i];
    out[plane + i] = hwc[3 * i + 1];
    out[2 * plane + i] = hwc[3 * i + 2];
  }
}

}  // namespace dp::data::image
