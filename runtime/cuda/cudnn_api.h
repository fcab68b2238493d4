// defines: CudnnApi (train.cudnn_api), which cuDNN API the GPU's convolutions run on, and its name
// table. Library-free (no CUDA header), so the config parses it in every build.
//
// Legacy: cudnnConvolutionForward / BackwardData / BackwardFilter with algorithms found by
// cudnnFind*AlgorithmEx (models/layers/conv2d/conv_algos.h). Graph: cuDNN's graph API through
// NVIDIA's cudnn-frontend (runtime/cuda/cudnn_graph.h): engine configs from heuristics, timed on
// first use of a shape, bias and a folded ReLU fused into the forward convolution's epilogue.
// Legacy stays the default until a GPU run shows the graph API correct and faster (docs/cuda.md).
#pragma once
#include <span>

#include "runtime/enum_names.h"

namespace dp::cuda {

enum class CudnnApi { Legacy, Graph };

inline constexpr EnumName<CudnnApi> kCudnnApiNames[] = {{CudnnApi::Legacy, "legacy"}, {CudnnApi::Graph, "graph"}};
constexpr std::span<const EnumName<CudnnApi>> enum_names(CudnnApi) { return kCudnnApiNames; }

}  // namespace dp::cuda
