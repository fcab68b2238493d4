#include "models/layers/conv2d/conv_algos_cuda.h"

#include <algorithm>
#include <vector>

#include "runtime/cuda/buffers.h"
#include "runtime/cuda/exec_context.h"
#include "runtime/cuda/check.h"

namespace dp::cuda {

static_assert(kCudnnStatusSuccess == CUDNN_STATUS_SUCCESS);
static_assert(kCudnnFmaMath == CUDNN_FMA_MATH);
static_assert(kCudnnDefaultMath == CUDNN_DEFAULT_MATH);
static_assert(kCudnnTensorOpMath == CUDNN_TENSOR_OP_MATH);
static_assert(kCudnnTensorOpMathAllowConversion == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);

namespace {
template <typename Perf>
std::vector<AlgoPerf> to_algo_perfs(const std::vector<Perf>& perfs, int returned) {
  std::vector<AlgoPerf> out;
  for (int i = 0; i < returned; ++i) {
    const Perf& p = perfs[static_cast<size_t>(i)];
    out.push_back({static_cast<int>(p.algo), static_cast<int>(p.status), p.time, p.memory, static_cast<int>(p.mathType)});
  }
  return out;
}
}  // namespace

AlgoPerf find_forward_algo(ExecContext& gpu, const ConvKey& key, const std::string& who,
                           cudnnTensorDescriptor_t x_desc, const void* x, cudnnFilterDescriptor_t w_desc,
                           const void* w, cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y_desc, void* y) {
  return ConvAlgoCache::global().get(ConvPass::Forward, key, gpu.workspace_limit(), who, [&] {
    int max_count = 0, returned = 0;
    CHECK_CUDNN(cudnnGetConvolutionForwardAlgorithmMaxCount(gpu.cudnn(), &max_count));
    std::vector<cudnnConvolutionFwdAlgoPerf_t> perfs(static_cast<size_t>(std::max(max_count, 1)));
    void* ws = gpu.workspace(gpu.workspace_limit());
    CHECK_CUDNN(cudnnFindConvolutionForwardAlgorithmEx(gpu.cudnn(), x_desc, x, w_desc, w, conv, y_desc, y,
                                                       static_cast<int>(perfs.size()), &returned, perfs.data(), ws,
                                                       gpu.workspace_limit()));
    return to_algo_perfs(perfs, returned);
  });
}

AlgoPerf find_backward_data_algo(ExecContext& gpu, const ConvKey& key, const std::string& who,
                                 cudnnFilterDescriptor_t w_desc, const void* w, cudnnTensorDescriptor_t dy_desc,
                                 const void* dy, cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t dx_desc,
                                 void* dx) {
  return ConvAlgoCache::global().get(ConvPass::BackwardData, key, gpu.workspace_limit(), who, [&] {
    int max_count = 0, returned = 0;
    CHECK_CUDNN(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(gpu.cudnn(), &max_count));
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perfs(static_cast<size_t>(std::max(max_count, 1)));
    void* ws = gpu.workspace(gpu.workspace_limit());
    CHECK_CUDNN(cudnnFindConvolutionBackwardDataAlgorithmEx(gpu.cudnn(), w_desc, w, dy_desc, dy, conv, dx_desc, dx,
                                                            static_cast<int>(perfs.size()), &returned, perfs.data(),
                                                            ws, gpu.workspace_limit()));
    return to_algo_perfs(perfs, returned);
  });
}

AlgoPerf find_backward_filter_algo(ExecContext& gpu, const ConvKey& key, const std::string& who,
                                   cudnnTensorDescriptor_t x_desc, const void* x, cudnnTensorDescriptor_t dy_desc,
                                   const void* dy, cudnnConvolutionDescriptor_t conv, cudnnFilterDescriptor_t dw_desc,
                                   size_t dw_bytes) {
  return ConvAlgoCache::global().get(ConvPass::BackwardFilter, key, gpu.workspace_limit(), who, [&] {
    int max_count = 0, returned = 0;
    CHECK_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(gpu.cudnn(), &max_count));
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perfs(static_cast<size_t>(std::max(max_count, 1)));
    // Find writes its trial results here, not into the gradient the real call accumulates into.
    DeviceBuffer scratch(dw_bytes, gpu.compute());
    void* ws = gpu.workspace(gpu.workspace_limit());
    CHECK_CUDNN(cudnnFindConvolutionBackwardFilterAlgorithmEx(gpu.cudnn(), x_desc, x, dy_desc, dy, conv, dw_desc,
                                                              scratch.data(), static_cast<int>(perfs.size()),
                                                              &returned, perfs.data(), ws, gpu.workspace_limit()));
    return to_algo_perfs(perfs, returned);
  });
}

}  // namespace dp::cuda
