#include "models/layers/conv2d/conv2d_ref.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/blas.h"

namespace dp::kernels::cpu {

namespace {

// Column-matrix workspace budget per chunk. 64 MiB holds a whole batch of 256 28x28 images for
// a 32->64 3x3 convolution, yet bounds memory for ImageNet-sized inputs.
constexpr size_t kWorkspaceBytes = size_t{64} << 20;

// One growing scratch buffer per thread and element type, shared by every conv layer: layers
// run one after another, so per-layer buffers would only multiply the memory.
template <typename T>
T* workspace(size_t n) {
  thread_local std::vector<T> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

// Samples per chunk: as many as fit the budget, at least 1.
template <typename T>
int64_t chunk_samples(const Conv2dDims& d) {
  const int64_t per_sample = (d.C * d.K * d.K + d.OC) * d.OH * d.OW * static_cast<int64_t>(sizeof(T));
  return std::clamp<int64_t>(static_cast<int64_t>(kWorkspaceBytes) / std::max<int64_t>(per_sample, 1), 1,
                             std::max<int64_t>(d.N, 1));
}

// Range [lo, hi) of output columns whose input column ow*stride - pad + kj lies inside [0, W).
inline void valid_range(int64_t kj, const Conv2dDims& d, int64_t& lo, int64_t& hi) {
  const int64_t first = d.pad - kj;  // ow*stride >= first
  lo = first <= 0 ? 0 : (first + d.stride - 1) / d.stride;
  const int64_t end = d.W + d.pad - kj;  // ow*stride < end
  hi = end <= 0 ? 0 : (end + d.stride - 1) / d.stride;
  lo = std::min(lo, d.OW);
  hi = std::clamp(hi, lo, d.OW);
}

// col (C*K*K, nb*OH*OW): row (c, ki, kj), column (n, oh, ow) = x[n0+n, c, oh*s-p+ki, ow*s-p+kj] or 0.
template <typename T>
void im2col(T* col, const T* x, const Conv2dDims& d, int64_t n0, int64_t nb) {
  const int64_t P = d.OH * d.OW, ld = nb * P;
#pragma omp parallel for collapse(2) schedule(static) if (d.C * nb * P * d.K * d.K > (1 << 14))
  for (int64_t c = 0; c < d.C; ++c)
    for (int64_t n = 0; n < nb; ++n) {
      const T* plane = x + ((n0 + n) * d.C + c) * d.H * d.W;  // (H, W)
      for (int64_t ki = 0; ki < d.K; ++ki)
        for (int64_t kj = 0; kj < d.K; ++kj) {
          T* row = col + ((c * d.K + ki) * d.K + kj) * ld + n * P;  // (OH, OW)
          int64_t lo, hi;
          valid_range(kj, d, lo, hi);
          for (int64_t oh = 0; oh < d.OH; ++oh) {
            T* out = row + oh * d.OW;  // (OW)
            const int64_t h = oh * d.stride - d.pad + ki;
            if (h < 0 || h >= d.H) {
              std::fill(out, out + d.OW, T(0));
              continue;
            }
            const T* in = plane + h * d.W;  // (W); column ow reads in[ow*stride - pad + kj]
            const int64_t shift = kj - d.pad;
            std::fill(out, out + lo, T(0));
            if (d.stride == 1) {
              if (hi > lo) std::memcpy(out + lo, in + lo + shift, sizeof(T) * (hi - lo));
            } else {
              for (int64_t ow = lo; ow < hi; ++ow) out[ow] = in[ow * d.stride + shift];
            }
            std::fill(out + hi, out + d.OW, T(0));
          }
        }
    }
}

// dx[n0+n, c] = sum of the column entries that im2col copied from each input pixel. One thread
// owns a whole (n, c) plane and adds in a fixed (ki, kj, oh, ow) order: deterministic.
template <typename T>
void col2im(T* dx, const T* col, const Conv2dDims& d, int64_t n0, int64_t nb) {
  const int64_t P = d.OH * d.OW, ld = nb * P;
#pragma omp parallel for collapse(2) schedule(static) if (d.C * nb * P * d.K * d.K > (1 << 14))
  for (int64_t n = 0; n < nb; ++n)
    for (int64_t c = 0; c < d.C; ++c) {
      T* plane = dx + ((n0 + n) * d.C + c) * d.H * d.W;  // (H, W)
      std::fill(plane, plane + d.H * d.W, T(0));
      for (int64_t ki = 0; ki < d.K; ++ki)
        for (int64_t kj = 0; kj < d.K; ++kj) {
          const T* row = col + ((c * d.K + ki) * d.K + kj) * ld + n * P;  // (OH, OW)
          int64_t lo, hi;
          valid_range(kj, d, lo, hi);
          for (int64_t oh = 0; oh < d.OH; ++oh) {
            const int64_t h = oh * d.stride - d.pad + ki;
            if (h < 0 || h >= d.H) continue;
            T* out = plane + h * d.W;  // (W)
            const T* in = row + oh * d.OW;
            const int64_t shift = kj - d.pad;
            for (int64_t ow = lo; ow < hi; ++ow) out[ow * d.stride + shift] += in[ow];
          }
        }
    }
}

}  // namespace

template <typename T>
void conv2d_forward(T* y, const T* x, const T* w, const T* b, const Conv2dDims& d) {
  const int64_t P = d.OH * d.OW, OCg = d.OC / d.groups, R = d.C / d.groups * d.K * d.K;  // R: rows per group
  const int64_t chunk = chunk_samples<T>(d);
  for (int64_t n0 = 0; n0 < d.N; n0 += chunk) {
    const int64_t nb = std::min(chunk, d.N - n0), ld = nb * P;
    T* col = workspace<T>(static_cast<size_t>((d.C * d.K * d.K + d.OC) * ld));  // (C*K*K, nb*P)
    T* out = col + d.C * d.K * d.K * ld;                                         // (OC, nb*P)
    im2col(col, x, d, n0, nb);
    for (int64_t g = 0; g < d.groups; ++g)
      gemm(false, false, OCg, ld, R, T(1), w + g * OCg * R, R, col + g * R * ld, ld, T(0), out + g * OCg * ld, ld);
    // (OC, nb, P) -> (nb, OC, P), adding the bias.
#pragma omp parallel for collapse(2) schedule(static) if (nb * d.OC * P > (1 << 14))
    for (int64_t n = 0; n < nb; ++n)
      for (int64_t o = 0; o < d.OC; ++o) {
        const T bias = b ? b[o] : T(0);
        const T* src = out + o * ld + n * P;
        T* dst = y + ((n0 + n) * d.OC + o) * P;
        for (int64_t p = 0; p < P; ++p) dst[p] = src[p] + bias;
      }
  }
}

template <typename T>
void conv2d_backward(T* dx, T* dw, T* db, const T* dy, const T* x, const T* w, const Conv2dDims& d) {
  const int64_t P = d.OH * d.OW, OCg = d.OC / d.groups, R = d.C / d.groups * d.K * d.K;
  if (db) {
#pragma omp parallel for schedule(static) if (d.N * d.OC * P > (1 << 14))
    for (int64_t o = 0; o < d.OC; ++o) {
      double s = 0;
      for (int64_t n = 0; n < d.N; ++n) {
        const T* src = dy + (n * d.OC + o) * P;
        for (int64_t p = 0; p < P; ++p) s += src[p];
      }
      db[o] += static_cast<T>(s);
    }
  }
  const int64_t chunk = chunk_samples<T>(d);
  for (int64_t n0 = 0; n0 < d.N; n0 += chunk) {
    const int64_t nb = std::min(chunk, d.N - n0), ld = nb * P;
    T* col = workspace<T>(static_cast<size_t>((d.C * d.K * d.K + d.OC) * ld));  // (C*K*K, nb*P)
    T* dyt = col + d.C * d.K * d.K * ld;                                         // (OC, nb*P)
#pragma omp parallel for collapse(2) schedule(static) if (nb * d.OC * P > (1 << 14))
    for (int64_t o = 0; o < d.OC; ++o)
      for (int64_t n = 0; n < nb; ++n)
        std::memcpy(dyt + o * ld + n * P, dy + ((n0 + n) * d.OC + o) * P, sizeof(T) * P);
    im2col(col, x, d, n0, nb);
    for (int64_t g = 0; g < d.groups; ++g) {
      T* col_g = col + g * R * ld;  // (R, nb*P)
      const T* dyt_g = dyt + g * OCg * ld;  // (OCg, nb*P)
      gemm(false, true, OCg, R, ld, T(1), dyt_g, ld, col_g, ld, T(1), dw + g * OCg * R, R);
      // col_g is no longer needed: it receives dcol_g (R, nb*P) = W_g^T @ dY_g.
      if (dx) gemm(true, false, R, ld, OCg, T(1), w + g * OCg * R, R, dyt_g, ld, T(0), col_g, ld);
    }
    if (dx) col2im(dx, col, d, n0, nb);
  }
}

template void conv2d_forward<float>(float*, const float*, const float*, const float*, const Conv2dDims&);
template void conv2d_forward<double>(double*, const double*, const double*, const double*, const Conv2dDims&);
template void conv2d_backward<float>(float*, float*, float*, const float*, const float*, const float*,
                                     const Conv2dDims&);
template void conv2d_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                      const Conv2dDims&);

}  // namespace dp::kernels::cpu
