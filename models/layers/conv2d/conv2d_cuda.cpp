// Conv2d's CUDA path: cuDNN's legacy convolution API with algorithms measured once per shape
// (models/layers/conv2d/conv_algos_cuda.h), unless the context runs cuDNN's graph API
// (train.cudnn_api = "graph", conv2d_graph_cuda.cpp) and it has plans for the layer; and the
// helpers both paths share (conv2d_cuda_util.h).
//
// Layouts: in NCHW mode (f32) x/y and the bound KCRS weight and gradient go to cuDNN as they
// are. Under ctx.channels_last x/y/dx/dy are NHWC and cuDNN wants the filter in KRSC, while
// the bound weight and gradient stay KCRS (the state-dict order the arenas hold): forward
// refreshes a KRSC copy of the weight (the weights change every step), backward uses that copy
// and writes the filter gradient into a KRSC scratch that a kernel adds back into the KCRS one
// (models/layers/conv2d/filter_layout.h).
//
// Math (conv_algos.h's conv_math_type): f32 data runs in CUDNN_FMA_MATH (no TF32), so it stays
// within ~1e-5 of the CPU twin, unless train.tf32 allows TF32 in convolutions (ctx.gpu->tf32():
// CUDNN_DEFAULT_MATH, PyTorch's default); bf16/f16 data runs on tensor cores with f32
// accumulation. The math is part of the algorithm cache's key.
//
// The bias and its gradient are the project's kernels (kernels/cuda/elementwise.h bias_add and
// bias_grad, as linear's), in every dtype and layout: cuDNN 9.19 refused
// cudnnConvolutionBackwardBias for bf16 on an H200, and docs/cuda.md's table of cuDNN calls says
// what each call documents.
//
// A folded ReLU (the GPU graph folds one under the graph API; a layer that fell back from it
// keeps it): forward applies it to y after the bias, backward masks dy by y > 0 first.
#include "models/layers/conv2d/conv2d.h"

#include <optional>

#include "kernels/cuda/elementwise.h"
#include "models/layers/conv2d/bias_layout.h"
#include "models/layers/common.h"
#include "models/layers/conv2d/conv2d_cuda_util.h"
#include "models/layers/conv2d/conv_algos_cuda.h"
#include "models/layers/conv2d/filter_layout.h"
#include "runtime/cuda/buffers.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/cudnn_desc.h"
#include "runtime/cuda/exec_context.h"

namespace dp::models {

struct Conv2d::CudaState {
  const cuda::ExecContext* gpu = nullptr;  // null: nothing below is valid
  cuda::ConvKey key;                       // what the descriptors and choices describe
  cuda::TensorDesc x, y;                   // x and dx [N, C, H, W]; y and dy [N, K, OH, OW]
  cuda::FilterDesc w;                      // weight and its gradient: KCRS, or KRSC channels last
  // One convolution descriptor per pass: each takes the math type its algorithm was measured
  // with (cuDNN picks the kernel by algorithm and math type together; PyTorch does the same).
  cuda::ConvDesc conv_fwd, conv_bwd_data, conv_bwd_filter;
  std::optional<cuda::AlgoPerf> fwd, bwd_data, bwd_filter;  // from the process's cache, once per key
  // Channels last only: (K, R, S, C/groups) weight copy, refreshed by every forward and read by
  // the backward that follows, and the filter-gradient scratch. On gpu->compute().
  cuda::DeviceBuffer w_krsc, dw_krsc;
  bool w_krsc_filled = false;
  cuda::DeviceBuffer dy_masked;  // a folded ReLU's masked output gradient
};

namespace conv_cuda {

// check_tensor's GPU twin: a `dtype` tensor of `shape` on `dev`.
void check_on_gpu(const Layer& layer, const Tensor& t, DType dtype, const Shape& shape, Device dev, const char* what) {
  DP_CHECK(t.defined(), "{}: {} is undefined", layer_str(layer), what);
  DP_CHECK(t.dtype() == dtype && t.shape() == shape && t.device() == dev, "{}: {} is {}, expected {}{} on {}",
           layer_str(layer), what, t.describe(), dtype_name(dtype), shape_str(shape), dev.str());
}

// The step's context and the input: the compute dtype cuDNN takes, on the context's device.
void check_step(const Layer& layer, const StepContext& ctx, const Tensor& x, const Tensor& out) {
  DP_CHECK(ctx.gpu != nullptr, "{}: a CUDA step without a GPU context (StepContext::gpu)", layer_str(layer));
  DP_CHECK(ctx.compute == DType::F32 || ctx.compute == DType::BF16 || ctx.compute == DType::F16,
           "{}: cuDNN convolution computes in f32, bf16 or f16, not {}", layer_str(layer), dtype_name(ctx.compute));
  DP_CHECK(out.device() == Device::cuda(ctx.gpu->device()), "{}: tensors on {}, the GPU context is on cuda:{}",
           layer_str(layer), out.device().str(), ctx.gpu->device());
  DP_CHECK(x.defined() && x.ndim() == 4, "{}: input is {}, expected [N, C, H, W]", layer_str(layer),
           x.defined() ? x.describe() : std::string("undefined"));
}

// y (k, r, s, c) = x (k, c, r, s), in the weight's dtype.
void weight_to_krsc(DType dt, void* y, const void* x, int64_t k, int64_t c, int64_t r, int64_t s, cudaStream_t st) {
  if (dt == DType::F32)
    CHECK_CUDA(kernels::cuda::filter_kcrs_to_krsc(static_cast<float*>(y), static_cast<const float*>(x), k, c, r, s, st));
  else
    CHECK_CUDA(kernels::cuda::filter_kcrs_to_krsc(static_cast<uint16_t*>(y), static_cast<const uint16_t*>(x), k, c, r,
                                                  s, st));
}

// y (k, c, r, s) += x (k, r, s, c), in the gradient's dtype.
void grad_add_from_krsc(DType dt, void* y, const void* x, int64_t k, int64_t c, int64_t r, int64_t s,
                        cudaStream_t st) {
  namespace kc = kernels::cuda;
  if (dt == DType::F32)
    CHECK_CUDA(kc::filter_krsc_add_to_kcrs_f32(static_cast<float*>(y), static_cast<const float*>(x), k, c, r, s, st));
  else if (dt == DType::BF16)
    CHECK_CUDA(kc::filter_krsc_add_to_kcrs_bf16(static_cast<uint16_t*>(y), static_cast<const uint16_t*>(x), k, c, r,
                                                s, st));
  else
    CHECK_CUDA(kc::filter_krsc_add_to_kcrs_f16(static_cast<uint16_t*>(y), static_cast<const uint16_t*>(x), k, c, r,
                                               s, st));
}

void relu_in_place(const Tensor& y, cudaStream_t st) {
  CHECK_CUDA(kernels::cuda::relu_forward(y.dtype(), y.raw(), y.raw(), y.numel(), st));
}

const void* relu_masked_grad(cuda::DeviceBuffer& scratch, const Tensor& dy, const Tensor& y, cudaStream_t st) {
  if (scratch.bytes() < dy.nbytes()) {
    scratch = cuda::DeviceBuffer();
    scratch = cuda::DeviceBuffer(dy.nbytes(), st);
  }
  CHECK_CUDA(kernels::cuda::relu_backward(dy.dtype(), scratch.data(), dy.raw(), y.raw(), dy.numel(), st));
  return scratch.data();
}

}  // namespace conv_cuda

namespace {
using conv_cuda::check_on_gpu;
using conv_cuda::check_step;

// Runs `conv` with the math type `chosen` was measured with.
void use_math_of(const cuda::ConvDesc& conv, const cuda::AlgoPerf& chosen) {
  CHECK_CUDNN(cudnnSetConvolutionMathType(conv.get(), static_cast<cudnnMathType_t>(chosen.math)));
}

}  // namespace

void Conv2d::check_params_cuda(DType dtype, Device dev, bool grads) const {
  DP_CHECK(params_.size() == (a_.bias ? 2u : 1u) && grads_.size() == params_.size(), "{}: {} parameters bound",
           layer_str(*this), params_.size());
  const Shape wshape{a_.out_channels, C_ / a_.groups, a_.kernel, a_.kernel};
  check_on_gpu(*this, params_[0], dtype, wshape, dev, "weight");
  if (grads) check_on_gpu(*this, grads_[0], dtype, wshape, dev, "weight gradient");
  if (!a_.bias) return;
  check_on_gpu(*this, params_[1], dtype, {a_.out_channels}, dev, "bias");
  if (grads) check_on_gpu(*this, grads_[1], dtype, {a_.out_channels}, dev, "bias gradient");
}

Conv2d::CudaState& Conv2d::cuda_state(const StepContext& ctx, DType dt, int64_t batch) {
  const cuda::ConvKey key{.dtype = dt,
                          .channels_last = ctx.channels_last,
                          .n = batch, .c = C_, .h = H_, .w = W_,
                          .k = a_.out_channels, .r = a_.kernel, .s = a_.kernel,
                          .pad = a_.padding, .stride = a_.stride, .groups = a_.groups,
                          .tensor_ops = dt != DType::F32,
                          .tf32 = dt == DType::F32 && tf32_in_convolutions(ctx.gpu->tf32()),
                          // Channels last hands cuDNN the layer's own KRSC buffers (fresh
                          // allocations); NCHW the arena's views of the weight and its gradient.
                          .align = ctx.channels_last ? 256 : cuda::pointer_alignment({params_[0].raw(), grads_[0].raw()})};
  if (!cuda_) cuda_.emplace();
  CudaState& st = *cuda_;
  if (st.gpu == ctx.gpu && st.key == key) return st;

  // A new batch size (or dtype, layout, context): describe it again. Invalid until done, so a
  // throw below leaves nothing half-described behind. The KRSC buffers (and the forward's
  // weight copy in them) outlive a change of batch size only.
  cuda::ConvKey other_batch = st.key;
  other_batch.n = batch;
  const bool batch_only = st.gpu == ctx.gpu && other_batch == key;
  st.gpu = nullptr;
  const bool cl = key.channels_last;
  const int64_t K = a_.out_channels, Cg = C_ / a_.groups, R = a_.kernel;
  st.x.set(dt, batch, C_, H_, W_, cl);
  st.y.set(dt, batch, K, OH_, OW_, cl);
  st.w.set(dt, K, Cg, R, R, cl);
  for (cuda::ConvDesc* conv : {&st.conv_fwd, &st.conv_bwd_data, &st.conv_bwd_filter}) {
    conv->set(a_.padding, a_.stride, a_.groups, DType::F32);
    CHECK_CUDNN(cudnnSetConvolutionMathType(conv->get(), static_cast<cudnnMathType_t>(cuda::conv_math_type(key))));
  }
  st.fwd.reset();
  st.bwd_data.reset();
  st.bwd_filter.reset();
  if (!batch_only) {
    const size_t w_bytes = static_cast<size_t>(K * Cg * R * R) * dtype_size(dt);
    st.w_krsc = cl ? cuda::DeviceBuffer(w_bytes, ctx.gpu->compute()) : cuda::DeviceBuffer();
    st.dw_krsc = cl ? cuda::DeviceBuffer(w_bytes, ctx.gpu->compute()) : cuda::DeviceBuffer();
    st.w_krsc_filled = false;
  }
  st.key = key;
  st.gpu = ctx.gpu;
  return st;
}

void Conv2d::forward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) {
  check_step(*this, ctx, x[0], y);
  const DType dt = ctx.compute;
  const Device dev = y.device();
  const int64_t N = x[0].dim(0);
  check_on_gpu(*this, x[0], dt, with_batch(N, {C_, H_, W_}), dev, "input");
  check_on_gpu(*this, y, dt, with_batch(N, {a_.out_channels, OH_, OW_}), dev, "output");
  check_params_cuda(dt, dev, /*grads=*/false);
  if (N == 0) return;
  if (uses_graph_api(ctx) && forward_graph(ctx, x[0], y)) return;

  CudaState& st = cuda_state(ctx, dt, N);
  cuda::ExecContext& gpu = *ctx.gpu;
  const void* w = params_[0].raw();
  if (st.key.channels_last) {
    conv_cuda::weight_to_krsc(dt, st.w_krsc.data(), w, a_.out_channels, C_ / a_.groups, a_.kernel, a_.kernel,
                              gpu.compute());
    st.w_krsc_filled = true;
    w = st.w_krsc.data();
  }
  // Measuring overwrites y; the real call below then writes it.
  if (!st.fwd) {
    st.fwd = cuda::find_forward_algo(gpu, st.key, layer_str(*this), st.x.get(), x[0].raw(), st.w.get(), w,
                                     st.conv_fwd.get(), st.y.get(), y.raw());
    use_math_of(st.conv_fwd, *st.fwd);
  }
  const float one = 1.0f, zero = 0.0f;
  void* ws = gpu.workspace(st.fwd->memory);
  CHECK_CUDNN(cudnnConvolutionForward(gpu.cudnn(), &one, st.x.get(), x[0].raw(), st.w.get(), w, st.conv_fwd.get(),
                                      static_cast<cudnnConvolutionFwdAlgo_t>(st.fwd->algo), ws, st.fwd->memory,
                                      &zero, st.y.get(), y.raw()));
  // y += bias: the project's kernel, as the bias gradient below (cudnnAddTensor's reference lists
  // no bf16, and docs/cuda.md's table says why neither bias call goes to cuDNN).
  if (a_.bias) {
    const ConvBiasView v = conv_bias_view(N, a_.out_channels, OH_ * OW_, st.key.channels_last);
    CHECK_CUDA(kernels::cuda::bias_add(dt, y.raw(), params_[1].raw(), v.outer, v.channels, v.inner, gpu.compute()));
  }
  if (epilogue() == Epilogue::Relu) conv_cuda::relu_in_place(y, gpu.compute());
}

void Conv2d::backward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor& y, const Tensor& dy,
                           std::vector<Tensor>& dx) {
  check_step(*this, ctx, x[0], dy);
  const DType dt = ctx.compute;
  const Device dev = dy.device();
  const int64_t N = x[0].dim(0);
  check_on_gpu(*this, x[0], dt, with_batch(N, {C_, H_, W_}), dev, "input");
  check_on_gpu(*this, dy, dt, with_batch(N, {a_.out_channels, OH_, OW_}), dev, "output gradient");
  if (dx[0].defined()) check_on_gpu(*this, dx[0], dt, with_batch(N, {C_, H_, W_}), dev, "input gradient");
  check_params_cuda(dt, dev, /*grads=*/true);
  if (N == 0) return;
  const bool relu = epilogue() == Epilogue::Relu;
  if (relu) check_on_gpu(*this, y, dt, dy.shape(), dev, "output");
  if (uses_graph_api(ctx) && backward_graph(ctx, x[0], y, dy, dx[0])) return;

  CudaState& st = cuda_state(ctx, dt, N);
  cuda::ExecContext& gpu = *ctx.gpu;
  const bool cl = st.key.channels_last;
  const int64_t K = a_.out_channels, Cg = C_ / a_.groups, R = a_.kernel;
  const float one = 1.0f, zero = 0.0f;
  const std::string who = layer_str(*this);
  // The gradient of the convolution's own output: dy, masked by a folded ReLU.
  const void* g = relu ? conv_cuda::relu_masked_grad(st.dy_masked, dy, y, gpu.compute()) : dy.raw();

  // dx = W^T * dy (overwritten), with the weight as the forward gave it to cuDNN (a layer that
  // just fell back from the graph API has no copy yet: the weights have not changed since).
  if (dx[0].defined()) {
    if (cl && !st.w_krsc_filled) {
      conv_cuda::weight_to_krsc(dt, st.w_krsc.data(), params_[0].raw(), K, Cg, R, R, gpu.compute());
      st.w_krsc_filled = true;
    }
    const void* w = cl ? st.w_krsc.data() : params_[0].raw();
    if (!st.bwd_data) {
      st.bwd_data = cuda::find_backward_data_algo(gpu, st.key, who, st.w.get(), w, st.y.get(), g,
                                                  st.conv_bwd_data.get(), st.x.get(), dx[0].raw());
      use_math_of(st.conv_bwd_data, *st.bwd_data);
    }
    void* ws = gpu.workspace(st.bwd_data->memory);
    CHECK_CUDNN(cudnnConvolutionBackwardData(gpu.cudnn(), &one, st.w.get(), w, st.y.get(), g,
                                             st.conv_bwd_data.get(),
                                             static_cast<cudnnConvolutionBwdDataAlgo_t>(st.bwd_data->algo), ws,
                                             st.bwd_data->memory, &zero, st.x.get(), dx[0].raw()));
  }

  // dW += dy * x: straight into the KCRS gradient (beta 1), or channels last into the KRSC
  // scratch (beta 0) and then added into it.
  if (!st.bwd_filter) {
    st.bwd_filter = cuda::find_backward_filter_algo(gpu, st.key, who, st.x.get(), x[0].raw(), st.y.get(), g,
                                                    st.conv_bwd_filter.get(), st.w.get(), grads_[0].nbytes());
    use_math_of(st.conv_bwd_filter, *st.bwd_filter);
  }
  void* dw = cl ? st.dw_krsc.data() : grads_[0].raw();
  void* ws = gpu.workspace(st.bwd_filter->memory);
  CHECK_CUDNN(cudnnConvolutionBackwardFilter(gpu.cudnn(), &one, st.x.get(), x[0].raw(), st.y.get(), g,
                                             st.conv_bwd_filter.get(),
                                             static_cast<cudnnConvolutionBwdFilterAlgo_t>(st.bwd_filter->algo), ws,
                                             st.bwd_filter->memory, cl ? &zero : &one, st.w.get(), dw));
  if (cl) conv_cuda::grad_add_from_krsc(dt, grads_[0].raw(), dw, K, Cg, R, R, gpu.compute());

  // db += sum of dy over N, OH, OW (accumulated, as every parameter gradient): the project's
  // kernel, not cudnnConvolutionBackwardBias, which returned CUDNN_STATUS_NOT_SUPPORTED for bf16
  // (cuDNN 9.19 on an H200).
  if (a_.bias) {
    const ConvBiasView v = conv_bias_view(N, K, OH_ * OW_, cl);
    CHECK_CUDA(kernels::cuda::bias_grad(dt, grads_[1].raw(), g, v.outer, v.channels, v.inner, gpu.compute()));
  }
}

}  // namespace dp::models
