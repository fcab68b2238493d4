// defines: what Conv2d's two CUDA paths share (conv2d_cuda.cpp: cuDNN's legacy API,
// conv2d_graph_cuda.cpp: its graph API): the argument checks of a CUDA step, the filter layout
// changes, and the folded ReLU's epilogue and gradient mask. CUDA builds only.
#pragma once
#include <cuda_runtime_api.h>

#include "runtime/cuda/buffers.h"
#include "runtime/layer.h"

namespace dp::models::conv_cuda {

// check_tensor's GPU twin: a `dtype` tensor of `shape` on `dev`.
void check_on_gpu(const Layer& layer, const Tensor& t, DType dtype, const Shape& shape, Device dev, const char* what);
// The step's context and the input: the compute dtype cuDNN takes, on the context's device.
void check_step(const Layer& layer, const StepContext& ctx, const Tensor& x, const Tensor& out);

// y (k, r, s, c) = x (k, c, r, s), in the weight's dtype.
void weight_to_krsc(DType dt, void* y, const void* x, int64_t k, int64_t c, int64_t r, int64_t s, cudaStream_t st);
// y (k, c, r, s) += x (k, r, s, c), in the gradient's dtype.
void grad_add_from_krsc(DType dt, void* y, const void* x, int64_t k, int64_t c, int64_t r, int64_t s, cudaStream_t st);

// The folded ReLU (Epilogue::Relu): y = max(y, 0) in place, after a forward that did not fuse it.
void relu_in_place(const Tensor& y, cudaStream_t st);
// The output gradient masked by the folded ReLU: scratch (grown to dy's size on `st`) = dy where
// y > 0, else 0 (relu's own backward, kernels/cuda/elementwise.h); returns scratch's data.
const void* relu_masked_grad(cuda::DeviceBuffer& scratch, const Tensor& dy, const Tensor& y, cudaStream_t st);

}  // namespace dp::models::conv_cuda
