// defines: MemoryPath (the kernels a layer runs on, as far as memory goes) and NeedsQuery (the
// shapes, dtype and epilogue a layer is asked about): the vocabulary of Layer::backward_needs, by which every
// layer declares what its backward reads of its forward (its inputs, its output, what it keeps
// besides: a mask, statistics, a workspace) and its transient scratch, for the memory plan
// (runtime/memory_plan.h's BackwardNeeds) and `dptrain memory`. Host code on every build: a
// CPU-only build plans a CUDA run from the same declarations.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/epilogue.h"
#include "runtime/memory_plan.h"
#include "runtime/tensor.h"

namespace dp {

enum class MemoryPath : uint8_t {
  CpuReference,  // train.cpu_backend = "reference", or any dtype oneDNN does not take
  CpuOnednn,     // train.cpu_backend = "onednn", f32
  Cuda,          // a GPU graph (cuDNN, cuBLASLt, own kernels)
};

// One node as the planner asks about it: the batched shapes of its inputs and output, the
// activations' dtype, the path and the epilogue the plan gives it (the question is about a plan,
// which need not be the one the layer runs now: asking reads the layer, never sets it). `training` is the planner's (an evaluation step runs no
// backward); a layer answers for its backward in either mode, which reads the same.
struct NeedsQuery {
  std::vector<Shape> in;  // batched, the layer's own inputs (and under AddRelu the residual last)
  Shape out;              // batched
  DType dtype = DType::F32;
  MemoryPath path = MemoryPath::CpuReference;
  Epilogue epilogue = Epilogue::None;
  bool training = true;
  // 4-D activations stored NHWC: a CPU graph under oneDNN whose layers all take it
  // (runtime/step_memory.h cpu_channels_last); a library's workspace may depend on the layout.
  bool channels_last = false;
};

}  // namespace dp
