#include "kernels/cpu/pool2d.h"

#include <algorithm>
#include <limits>

namespace dp::kernels::cpu {

namespace {

// The window of output (oh, ow) clipped to the input: rows [h0, h1), columns [w0, w1).
struct Window {
  int64_t h0, h1, w0, w1;
};
inline Window window(const Pool2dDims& d, int64_t oh, int64_t ow) {
  const int64_t hs = oh * d.stride - d.pad, ws = ow * d.stride - d.pad;
  return {std::max<int64_t>(hs, 0), std::min(hs + d.K, d.H), std::max<int64_t>(ws, 0), std::min(ws + d.K, d.W)};
}

// The window's maximum value, PyTorch's rule: -inf to start, NaN propagates. `v > m ? v : m`
// compiles to a max instruction and NaNs are tracked on the side: no data-dependent branches,
// which random activations would make mispredict half the time.
template <typename T>
inline T window_max(const T* plane, const Pool2dDims& d, const Window& win) {
  T m = -std::numeric_limits<T>::infinity();
  bool nan = false;
  for (int64_t h = win.h0; h < win.h1; ++h)
    for (int64_t w = win.w0; w < win.w1; ++w) {
      const T v = plane[h * d.W + w];
      m = v > m ? v : m;
      nan |= v != v;
    }
  return nan ? std::numeric_limits<T>::quiet_NaN() : m;
}

// Index (h*W + w) of the first element equal to the window's maximum, the one PyTorch picks
// among ties (scanned backwards with a select, so the first match is the last one written). With
// a NaN maximum nothing matches and the window's first element gets the gradient.
template <typename T>
inline int64_t argmax(const T* plane, const Pool2dDims& d, const Window& win) {
  const T m = window_max(plane, d, win);
  int64_t best = win.h0 * d.W + win.w0;
  for (int64_t h = win.h1 - 1; h >= win.h0; --h)
    for (int64_t w = win.w1 - 1; w >= win.w0; --w) best = plane[h * d.W + w] == m ? h * d.W + w : best;
  return best;
}

inline bool big(const Pool2dDims& d) { return d.N * d.C * d.OH * d.OW * d.K * d.K > (1 << 14); }

}  // namespace

template <typename T>
void maxpool2d_forward(T* y, const T* x, const Pool2dDims& d) {
#pragma omp parallel for schedule(static) if (big(d))
  for (int64_t nc = 0; nc < d.N * d.C; ++nc) {
    const T* plane = x + nc * d.H * d.W;  // (H, W)
    T* out = y + nc * d.OH * d.OW;        // (OH, OW)
    for (int64_t oh = 0; oh < d.OH; ++oh)
      for (int64_t ow = 0; ow < d.OW; ++ow) out[oh * d.OW + ow] = window_max(plane, d, window(d, oh, ow));
  }
}

template <typename T>
void maxpool2d_backward(T* dx, const T* dy, const T* x, const Pool2dDims& d) {
#pragma omp parallel for schedule(static) if (big(d))
  for (int64_t nc = 0; nc < d.N * d.C; ++nc) {
    const T* plane = x + nc * d.H * d.W;
    const T* g = dy + nc * d.OH * d.OW;
    T* out = dx + nc * d.H * d.W;
    std::fill(out, out + d.H * d.W, T(0));
    for (int64_t oh = 0; oh < d.OH; ++oh)
      for (int64_t ow = 0; ow < d.OW; ++ow) out[argmax(plane, d, window(d, oh, ow))] += g[oh * d.OW + ow];
  }
}

// Divisor with count_include_pad: the window clipped to the padded input (in floor mode this is
// always K*K, computed as PyTorch does for clarity).
inline int64_t padded_count(const Pool2dDims& d, int64_t oh, int64_t ow) {
  const int64_t hs = oh * d.stride - d.pad, ws = ow * d.stride - d.pad;
  return (std::min(hs + d.K, d.H + d.pad) - hs) * (std::min(ws + d.K, d.W + d.pad) - ws);
}

template <typename T>
void avgpool2d_forward(T* y, const T* x, const Pool2dDims& d) {
#pragma omp parallel for schedule(static) if (big(d))
  for (int64_t nc = 0; nc < d.N * d.C; ++nc) {
    const T* plane = x + nc * d.H * d.W;
    T* out = y + nc * d.OH * d.OW;
    for (int64_t oh = 0; oh < d.OH; ++oh)
      for (int64_t ow = 0; ow < d.OW; ++ow) {
        const Window win = window(d, oh, ow);
        T s = 0;
        for (int64_t h = win.h0; h < win.h1; ++h)
          for (int64_t w = win.w0; w < win.w1; ++w) s += plane[h * d.W + w];
        out[oh * d.OW + ow] = s / static_cast<T>(padded_count(d, oh, ow));
      }
  }
}

template <typename T>
void avgpool2d_backward(T* dx, const T* dy, const Pool2dDims& d) {
#pragma omp parallel for schedule(static) if (big(d))
  for (int64_t nc = 0; nc < d.N * d.C; ++nc) {
    const T* g = dy + nc * d.OH * d.OW;
    T* out = dx + nc * d.H * d.W;
    std::fill(out, out + d.H * d.W, T(0));
    for (int64_t oh = 0; oh < d.OH; ++oh)
      for (int64_t ow = 0; ow < d.OW; ++ow) {
        const Window win = window(d, oh, ow);
        const T v = g[oh * d.OW + ow] / static_cast<T>(padded_count(d, oh, ow));
        for (int64_t h = win.h0; h < win.h1; ++h)
          for (int64_t w = win.w0; w < win.w1; ++w) out[h * d.W + w] += v;
      }
  }
}

template <typename T>
void global_avgpool_forward(T* y, const T* x, int64_t NC, int64_t HW) {
#pragma omp parallel for schedule(static) if (NC * HW > (1 << 14))
  for (int64_t i = 0; i < NC; ++i) {
    double s = 0;
    for (int64_t j = 0; j < HW; ++j) s += x[i * HW + j];
    y[i] = static_cast<T>(s / static_cast<double>(HW));
  }
}

template <typename T>
void global_avgpool_backward(T* dx, const T* dy, int64_t NC, int64_t HW) {
#pragma omp parallel for schedule(static) if (NC * HW > (1 << 14))
  for (int64_t i = 0; i < NC; ++i) {
    const T v = static_cast<T>(dy[i] / static_cast<double>(HW));
    for (int64_t j = 0; j < HW; ++j) dx[i * HW + j] = v;
  }
}

#define DP_INSTANTIATE(T)                                                         \
  template void maxpool2d_forward<T>(T*, const T*, const Pool2dDims&);            \
  template void maxpool2d_backward<T>(T*, const T*, const T*, const Pool2dDims&); \
  template void avgpool2d_forward<T>(T*, const T*, const Pool2dDims&);            \
  template void avgpool2d_backward<T>(T*, const T*, const Pool2dDims&);           \
  template void global_avgpool_forward<T>(T*, const T*, int64_t, int64_t);        \
  template void global_avgpool_backward<T>(T*, const T*, int64_t, int64_t);
DP_INSTANTIATE(float)
DP_INSTANTIATE(double)
#undef DP_INSTANTIATE

}  // namespace dp::kernels::cpu
