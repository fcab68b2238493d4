// defines: what maxpool2d and avgpool2d share: their arguments and the setup-time validation
// of a pooling window against a [C, H, W] input.
#pragma once
#include "kernels/cpu/pool2d.h"
#include "runtime/layer_registry.h"

namespace dp::models {

// kernel (int, required, >= 1), stride (int, 0 = kernel, >= 0), padding (int, 0, >= 0).
std::vector<ArgSpec> pool2d_arg_specs();

// Validates like torch (padding at most half the kernel, output at least 1x1) and returns the
// dimensions with N = 0 (set per batch). stride 0 means stride = kernel.
kernels::cpu::Pool2dDims setup_pool2d(const Layer& layer, const std::vector<Shape>& in, int64_t kernel, int64_t stride,
                                      int64_t padding);

}  // namespace dp::models
