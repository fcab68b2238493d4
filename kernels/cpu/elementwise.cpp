#include "kernels/cpu/elementwise.h"

namespace dp::kernels::cpu {

template <typename T>
static void add_inplace_impl(T* dst, const T* src, int64_t n) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

void add_inplace(float* dst, const float* src, int64_t n) { add_inplace_impl(dst, src, n); }
void add_inplace(double* dst, const double* src, int64_t n) { add_inplace_impl(dst, src, n); }

void scale(float* y, const float* x, float alpha, int64_t n) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) y[i] = alpha * x[i];
}

// `omp simd`: vectorised even at -O2, and as blends rather than branches (a ReLU mask of random
// signs defeats the branch predictor).
template <typename T>
void add(T* y, const T* a, const T* b, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

template <typename T>
void relu_forward(T* y, const T* x, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] < T(0) ? T(0) : x[i];  // NaN passes, as in torch
}

template <typename T>
void add_relu(T* y, const T* a, const T* b, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) {
    const T v = a[i] + b[i];
    y[i] = v < T(0) ? T(0) : v;
  }
}

template <typename T>
void relu_backward(T* dx, const T* dy, const T* y, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) {
    const T g = dy[i];  // loaded unconditionally, so the select can be vectorised
    dx[i] = y[i] > T(0) ? g : T(0);
  }
}

template void add<float>(float*, const float*, const float*, int64_t);
template void add<double>(double*, const double*, const double*, int64_t);
template void add_relu<float>(float*, const float*, const float*, int64_t);
template void add_relu<double>(double*, const double*, const double*, int64_t);
template void relu_forward<float>(float*, const float*, int64_t);
template void relu_forward<double>(double*, const double*, int64_t);
template void relu_backward<float>(float*, const float*, const float*, int64_t);
template void relu_backward<double>(double*, const double*, const double*, int64_t);

}  // namespace dp::kernels::cpu
