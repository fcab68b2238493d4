// defines: a Conv2d's plans on cuDNN's graph API as pure functions — FilterLayout (how the weight
// and the filter gradient are described to cuDNN), filter_layouts (which descriptions a pass is
// timed over), filter_layout_of (which one a chosen plan uses), conv_math, and the PlanKeys of the
// forward (with its fused epilogue), data-gradient and filter-gradient passes. Compiled and tested
// in every build; models/layers/conv2d/conv2d_graph_cuda.cpp runs them.
//
// The weight (and its gradient) is bound KCRS, the state dict's order. In NCHW mode cuDNN takes
// it so. Channels last (NHWC activations), cuDNN's samples and PyTorch hand the filter over
// channels last too (KRSC), which costs a copy of the weight per step (models/layers/conv2d/
// filter_layout.h); the graph API takes strides, so the KCRS weight can also be described as it
// lies, with no copy, if an engine accepts an NHWC input with a KCRS filter. The documentation
// does not say that any does, so both descriptions are timed against each other on the first
// use of a shape, and the copy is made only when the winner reads KRSC. A 1x1 or depthwise
// (C/groups = 1) filter is the same bytes in both orders: one description, never a copy.
#pragma once
#include <cstdint>
#include <vector>

#include "models/layers/conv2d/conv2d_ref.h"
#include "runtime/cuda/graph_plan_key.h"

namespace dp::models {

enum class FilterLayout : uint8_t { Kcrs, Krsc };

// The filter descriptions a pass is timed over: Kcrs alone in NCHW mode or when both orders are
// the same bytes (kernel 1x1, or one channel per group); else Kcrs (no copy) and Krsc (the copy).
std::vector<FilterLayout> filter_layouts(const kernels::cpu::Conv2dDims& d, bool channels_last);
// The layout of the filter (or filter gradient) a conv key describes.
FilterLayout filter_layout_of(const cuda::PlanKey& k);

// f32 data keeps full FMA precision (no TF32, as the legacy path's CUDNN_FMA_MATH); 16-bit data
// runs on tensor cores with f32 accumulation.
cuda::MathMode conv_math(DType dtype, bool tf32 = false);

// What every pass of one layer at one batch size shares.
struct ConvGraphShape {
  kernels::cpu::Conv2dDims d;
  DType dtype = DType::F32;
  bool channels_last = false;  // NHWC activations
  int device = 0;
  bool tf32 = false;           // f32 data may run on TF32 tensor cores (train.tf32: conv or all)
};

// x, w, [bias], y; the pointers set the alignments (bias only with kFuseBias).
cuda::PlanKey conv_fprop_key(const ConvGraphShape& s, FilterLayout w_layout, uint8_t fusion, const void* x,
                             const void* w, const void* bias, const void* y);
// dy, w, dx.
cuda::PlanKey conv_dgrad_key(const ConvGraphShape& s, FilterLayout w_layout, const void* dy, const void* w,
                             const void* dx);
// x, dy, dw.
cuda::PlanKey conv_wgrad_key(const ConvGraphShape& s, FilterLayout dw_layout, const void* x, const void* dy,
                             const void* dw);

}  // namespace dp::models
