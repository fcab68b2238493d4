// defines: CPU reference elementwise kernels (raw pointers, no tensors).
#pragma once
#include <cstdint>

namespace dp::kernels::cpu {

// dst[i] += src[i]
void add_inplace(float* dst, const float* src, int64_t n);
void add_inplace(double* dst, const double* src, int64_t n);

// y[i] = alpha * x[i]; y may alias x (kernels/cuda/elementwise.h's scale is its twin)
void scale(float* y, const float* x, float alpha, int64_t n);

// y[i] = a[i] + b[i]
template <typename T>
void add(T* y, const T* a, const T* b, int64_t n);

// y[i] = max(a[i] + b[i], 0): add then relu_forward, one pass (the oneDNN backend's add+ReLU)
template <typename T>
void add_relu(T* y, const T* a, const T* b, int64_t n);

// y[i] = max(x[i], 0)
template <typename T>
void relu_forward(T* y, const T* x, int64_t n);
// dx[i] = y[i] > 0 ? dy[i] : 0   (PyTorch's threshold_backward on the output)
template <typename T>
void relu_backward(T* dx, const T* dy, const T* y, int64_t n);

}  // namespace dp::kernels::cpu
