// defines: nchw_to_nhwc / nhwc_to_nchw, the CPU's activation layout changes (the twins of
// kernels/cuda/layout.h): the graph's model input and output under the oneDNN backend's
// channels-last activations, and flatten's NHWC input (its output is in PyTorch's NCHW order).
#pragma once
#include <cstdint>

namespace dp::kernels::cpu {

// dst (N, H*W, C) from src (N, C, H*W); and back. float or double.
template <typename T>
void nchw_to_nhwc(T* dst, const T* src, int64_t N, int64_t C, int64_t HW);
template <typename T>
void nhwc_to_nchw(T* dst, const T* src, int64_t N, int64_t C, int64_t HW);

}  // namespace dp::kernels::cpu
