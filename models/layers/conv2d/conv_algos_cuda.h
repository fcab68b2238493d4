// defines: find_forward_algo, find_backward_data_algo, find_backward_filter_algo: a convolution
// layer's cuDNN algorithm for each pass, chosen through ConvAlgoCache (conv_algos.h) and, on a
// cache miss, measured with cudnnFind*AlgorithmEx on the layer's real buffers (as PyTorch's
// cudnn.benchmark). CUDA builds only.
#pragma once
#include <cudnn.h>

#include <cstddef>
#include <string>

#include "models/layers/conv2d/conv_algos.h"

namespace dp::cuda {

class ExecContext;

// The layer's algorithm for `key` through ConvAlgoCache::global(). On a miss they run
// cudnnFind*AlgorithmEx on gpu.cudnn() with gpu.workspace(gpu.workspace_limit()), which
// overwrites the output: call them before the real call, which then writes the right result.
// y / dx are the real outputs (overwritten). Backward filter measures into a scratch of
// dw_bytes it allocates itself, so a gradient that is accumulated into is not clobbered.
AlgoPerf find_forward_algo(ExecContext& gpu, const ConvKey& key, const std::string& who,
                           cudnnTensorDescriptor_t x_desc, const void* x, cudnnFilterDescriptor_t w_desc,
                           const void* w, cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y_desc, void* y);
AlgoPerf find_backward_data_algo(ExecContext& gpu, const ConvKey& key, const std::string& who,
                                 cudnnFilterDescriptor_t w_desc, const void* w, cudnnTensorDescriptor_t dy_desc,
                                 const void* dy, cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t dx_desc,
                                 void* dx);
AlgoPerf find_backward_filter_algo(ExecContext& gpu, const ConvKey& key, const std::string& who,
                                   cudnnTensorDescriptor_t x_desc, const void* x, cudnnTensorDescriptor_t dy_desc,
                                   const void* dy, cudnnConvolutionDescriptor_t conv, cudnnFilterDescriptor_t dw_desc,
                                   size_t dw_bytes);

}  // namespace dp::cuda
