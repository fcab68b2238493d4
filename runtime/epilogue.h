// defines: Epilogue, what a layer's CUDA path applies to its own output when the GPU plan
// (runtime/gpu_fusion.h) folds the nodes after it into it, and epilogue_name.
//   None     y = f(x)
//   Relu     y = relu(f(x))                 (a relu that is f's only consumer)
//   AddRelu  y = relu(f(x) + r)             (an add that is f's only consumer, whose only
//                                            consumer is a relu; r, the add's other input, is
//                                            the layer's extra last input)
//   Gelu     y = gelu_tanh(f(x))            (a tanh-approximation GELU that is f's only
//                                            consumer; f keeps its pre-activation f(x))
// Backward: g = dy * (y > 0) (Gelu: dy * gelu'(f(x))), the residual's gradient is g, and f's
// backward runs on g.
#pragma once
#include <cstdint>

namespace dp {

enum class Epilogue : uint8_t { None, Relu, AddRelu, Gelu };

constexpr const char* epilogue_name(Epilogue e) {
  return e == Epilogue::Relu ? "relu" : e == Epilogue::AddRelu ? "add+relu" : e == Epilogue::Gelu ? "gelu" : "none";
}

}  // namespace dp
