#include "models/layers/gelu/gelu_ref.h"

#include <cmath>

namespace dp::kernels::cpu {

namespace {
constexpr double kSqrt2OverPi = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kCubic = 0.044715;
constexpr double kInvSqrt2 = 0.7071067811865476;
constexpr double kInvSqrt2Pi = 0.3989422804014327;  // 1 / sqrt(2 pi)

double gelu(double x, bool tanh_approximation) {
  if (tanh_approximation) return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x)));
  return 0.5 * x * (1.0 + std::erf(x * kInvSqrt2));
}

double gelu_grad(double x, bool tanh_approximation) {
  if (tanh_approximation) {
    const double t = std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * kCubic * x * x);
  }
  return 0.5 * (1.0 + std::erf(x * kInvSqrt2)) + x * std::exp(-0.5 * x * x) * kInvSqrt2Pi;
}
}  // namespace

template <typename T>
void gelu_forward(T* y, const T* x, int64_t n, bool tanh_approximation) {
#pragma omp parallel for schedule(static) if (n > (1 << 15))
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(gelu(x[i], tanh_approximation));
}

template <typename T>
void gelu_backward(T* dx, const T* dy, const T* x, int64_t n, bool tanh_approximation) {
#pragma omp parallel for schedule(static) if (n > (1 << 15))
  for (int64_t i = 0; i < n; ++i) dx[i] = static_cast<T>(dy[i] * gelu_grad(x[i], tanh_approximation));
}

template void gelu_forward<float>(float*, const float*, int64_t, bool);
template void gelu_forward<double>(double*, const double*, int64_t, bool);
template void gelu_backward<float>(float*, const float*, const float*, int64_t, bool);
template void gelu_backward<double>(double*, const double*, const double*, int64_t, bool);

}  // namespace dp::kernels::cpu
