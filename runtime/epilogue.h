// defines: the vocabulary of fusion, shared by the layers and the plan (runtime/fusion_plan.h):
//   Epilogue     what a layer applies to its own output when the plan folds the nodes after it
//                into it (Layer::epilogue), and epilogue_name;
//   EpilogueSet  the epilogues a layer can apply on one path (Layer::applicable_epilogues);
//   FusionPath   the paths that differ in what they can fold (the CPU's oneDNN kernels, the GPU,
//                the GPU with convolutions on cuDNN's graph API);
//   Follower     what a layer is when it follows a host (Layer::as_follower).
// The epilogues:
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
#include <initializer_list>

namespace dp {

enum class Epilogue : uint8_t { None, Relu, AddRelu, Gelu };

constexpr const char* epilogue_name(Epilogue e) {
  return e == Epilogue::Relu ? "relu" : e == Epilogue::AddRelu ? "add+relu" : e == Epilogue::Gelu ? "gelu" : "none";
}

// A set of epilogues, one bit each (None is never a member: every layer can apply nothing).
class EpilogueSet {
 public:
  constexpr EpilogueSet() = default;
  constexpr EpilogueSet(std::initializer_list<Epilogue> es) {
    for (Epilogue e : es) bits_ = static_cast<uint8_t>(bits_ | bit(e));
  }
  constexpr bool has(Epilogue e) const { return (bits_ & bit(e)) != 0; }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr EpilogueSet operator|(EpilogueSet o) const { return EpilogueSet(static_cast<uint8_t>(bits_ | o.bits_)); }
  constexpr bool operator==(const EpilogueSet&) const = default;

 private:
  constexpr explicit EpilogueSet(uint8_t bits) : bits_(bits) {}
  static constexpr uint8_t bit(Epilogue e) {
    return e == Epilogue::None ? 0 : static_cast<uint8_t>(1u << static_cast<unsigned>(e));
  }
  uint8_t bits_ = 0;
};

// Where a graph runs, as far as folding goes: the layers' kernels differ in what they can apply.
enum class FusionPath : uint8_t {
  CpuOnednn,      // a CPU graph under train.cpu_backend = onednn, f32 (graph_cpu_plan.cpp)
  Gpu,            // a GPU graph under train.gpu_fusion, convolutions on cuDNN's legacy API
  GpuCudnnGraph,  // the same with train.cudnn_api = "graph": convolutions take a ReLU as well
};
constexpr FusionPath kFusionPaths[] = {FusionPath::CpuOnednn, FusionPath::Gpu, FusionPath::GpuCudnnGraph};

// What a node is to the plan when it follows a host (the plan folds only these plain ops).
enum class Follower : uint8_t {
  Other,     // never folded
  Relu,      // a plain ReLU: folds as Epilogue::Relu
  Add,       // a plain two-input sum: folds, with the relu after it, as Epilogue::AddRelu
  TanhGelu,  // a GELU with the tanh approximation: folds as Epilogue::Gelu
};

}  // namespace dp
