// defines: Pool2dDims and the CPU reference of 2-D pooling: max (PyTorch's F.max_pool2d: -inf
// padding, floor mode), average (F.avg_pool2d, count_include_pad=True, floor mode) and global
// average (F.adaptive_avg_pool2d(x, 1)).
//
// One OpenMP thread owns a whole (n, c) plane, so the scatter-adds of the backward (windows
// overlap when stride < kernel) happen in a fixed order: deterministic.
#pragma once
#include <cstdint>

namespace dp::kernels::cpu {

struct Pool2dDims {
  int64_t N, C, H, W;          // input (N, C, H, W)
  int64_t K, stride, pad;      // square window
  int64_t OH, OW;              // output (N, C, OH, OW)
};

// y (N, C, OH, OW) = max over each window (padding never wins; NaN propagates). The backward
// routes to the first maximum in row-major window order, as PyTorch does for ties.
template <typename T>
void maxpool2d_forward(T* y, const T* x, const Pool2dDims& d);
// dx (N, C, H, W) = dy routed to each window's chosen maximum (recomputed from x), summed.
template <typename T>
void maxpool2d_backward(T* dx, const T* dy, const T* x, const Pool2dDims& d);

// y = window sum / window size counted in the padded input (count_include_pad).
template <typename T>
void avgpool2d_forward(T* y, const T* x, const Pool2dDims& d);
template <typename T>
void avgpool2d_backward(T* dx, const T* dy, const Pool2dDims& d);

// y (NC) = mean of each plane of x (NC, HW); dx (NC, HW) = dy / HW.
template <typename T>
void global_avgpool_forward(T* y, const T* x, int64_t NC, int64_t HW);
template <typename T>
void global_avgpool_backward(T* dx, const T* dy, int64_t NC, int64_t HW);

}  // namespace dp::kernels::cpu
