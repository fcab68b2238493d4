// Every layer case on the GPU against its CPU twin: fp32 (NCHW) and bf16/fp16 (NHWC, channels
// last), the forward output, the input and parameter gradients, and the running statistics,
// on fresh random inputs, with guard regions around every device tensor. The CPU reference
// (f64) runs on the very values the GPU sees: inputs, parameters and dy rounded through the
// compute dtype. The convolution cases also run on cuDNN's graph API (train.cudnn_api =
// "graph"), with and without a folded ReLU (ConvOnCudnnApisGpu). Skips without a GPU.
#ifdef DPTRAIN_HAVE_CUDA
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "tests/gpu_test.h"
#include "tests/models/cuda_layer_harness.h"

namespace dp::test {
namespace {

struct Precision {
  DType compute;
  bool channels_last;
  double tol;  // normalised error bound against the f64 reference
};

// f32: cuDNN/cuBLAS in full-precision FMA math (no TF32) sum in another order than the CPU.
// bf16/f16: the output itself is rounded to 8 / 11 significant bits; inner sums are f32.
const Precision kPrecisions[] = {
    {DType::F32, false, 2e-5},
    {DType::BF16, true, 1.6e-2},
    {DType::F16, true, 2.5e-3},
};

struct CudaLayerCase {
  LayerCase layer;
  Precision precision;
};

void PrintTo(const CudaLayerCase& c, std::ostream* os) {
  *os << c.layer.name << " " << dtype_name(c.precision.compute);
}

std::vector<CudaLayerCase> cuda_cases() {
  std::vector<CudaLayerCase> out;
  for (const auto& p : kPrecisions)
    for (const auto& c : layer_cases()) {
      if (!c.cuda) continue;
      Precision q = p;
      // The attention rounds qkv, the heads' output and (backward) d att and d qkv to 16 bits
      // between its GEMMs and its core: twice the single-op bound there.
      if (c.type == "causal_self_attention" && p.compute != DType::F32) q.tol *= 2;
      out.push_back({c, q});
    }
  return out;
}

// The buffers' comparison without a GPU: num_batches_tracked (an i64 scalar) compares as its
// value (layer_harness.h's get() reads f32/f64 only: "tensor is i64[] on cpu, accessed as f32"
// on the first GPU run's bn_train and bn_eval cases).
TEST(CudaLayerHarness, IntegerBuffersCompareByValue) {
  Tensor tracked = Tensor::zeros({}, DType::I64);
  tracked.data<int64_t>()[0] = 3;
  Tensor seen = Tensor::zeros({}, DType::F64);
  seen.data<double>()[0] = 3;
  EXPECT_EQ(normalised_error(seen, gpu::to_f64(tracked)), 0);
  seen.data<double>()[0] = 4;
  EXPECT_EQ(normalised_error(seen, gpu::to_f64(tracked)), 1.0 / 3);
}

// One layer case on the GPU, its convolutions on `api`, against the CPU twin. relu: the layer
// carries a folded ReLU (as the GPU graph folds one into a convolution under the graph API): the
// twin's output goes through a ReLU, and its output gradient is masked where the GPU's output is
// not positive (the mask the GPU applies, so that outputs rounding to 0 on one side only do not
// count as errors).
void match_cpu_twin(const LayerCase& c, const Precision& p, cuda::CudnnApi api, bool relu) {
  const uint64_t seed = (uint64_t{std::random_device{}()} << 32) | std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  const Device dev = Device::cuda(0);
  cuda::ExecContext exec(0, size_t{64} << 20);
  exec.set_cudnn_api(api);

  // CPU reference in f64 on values representable in the compute dtype.
  TestLayer cpu = make_test_layer(c, DType::F64, seed);
  for (auto& t : cpu.params) t.copy_from(gpu::rounded(t, cpu.layer->low_precision_params() ? p.compute : DType::F32));
  gpu::GpuLayer g(c, cpu, p.compute, dev);
  if (relu) g.layer->set_epilogue(Epilogue::Relu);
  Rng rng(seed, 1);
  std::vector<Tensor> x = cpu.random_inputs(c.batch, rng);
  for (auto& t : x) t = gpu::rounded(t, p.compute);

  StepContext ctx = case_ctx(c);
  ctx.gpu = &exec;
  ctx.compute = p.compute;
  ctx.channels_last = p.channels_last;
  StepContext cpu_ctx = case_ctx(c);

  std::vector<Tensor> xd;
  for (const auto& t : x) xd.push_back(gpu::upload(t, p.compute, p.channels_last, dev));
  Tensor yd = gpu::guarded_zeros(with_batch(c.batch, g.out), p.compute, dev);
  g.layer->forward(ctx, xd, yd);
  Tensor y = cpu.forward(cpu_ctx, x);
  if (relu)
    for (int64_t i = 0; i < y.numel(); ++i) set(y, i, std::max(get(y, i), 0.0));
  const Tensor y_gpu = gpu::download(yd, p.channels_last);
  EXPECT_LT(normalised_error(y_gpu, y), p.tol) << c.name << " output";
  EXPECT_TRUE(gpu::guards_intact(yd)) << c.name << " output written out of bounds";
  for (size_t j = 0; j < cpu.buffers.size(); ++j)
    if (is_floating(cpu.buffers[j].dtype()))
      EXPECT_LT(normalised_error(gpu::download(g.buffers[j], false), cpu.buffers[j]), p.tol) << c.name << " buffer " << j;
    else
      EXPECT_EQ(normalised_error(gpu::download(g.buffers[j], false), gpu::to_f64(cpu.buffers[j])), 0) << c.name;

  const Tensor dy = gpu::rounded(random_normal(y.shape(), DType::F64, rng), p.compute);
  const Tensor dyd = gpu::upload(dy, p.compute, p.channels_last, dev);
  std::vector<Tensor> dxd;
  for (const auto& t : xd) dxd.push_back(gpu::guarded_zeros(t.shape(), p.compute, dev));
  g.layer->backward(ctx, xd, yd, dyd, dxd);
  Tensor dy_cpu = dy.clone();
  if (relu)
    for (int64_t i = 0; i < dy_cpu.numel(); ++i)
      if (!(get(y_gpu, i) > 0)) set(dy_cpu, i, 0.0);
  const std::vector<Tensor> dx = cpu.backward(cpu_ctx, x, y, dy_cpu);
  for (size_t k = 0; k < dx.size(); ++k) {
    EXPECT_LT(normalised_error(gpu::download(dxd[k], p.channels_last), dx[k]), p.tol) << c.name << " dx" << k;
    EXPECT_TRUE(gpu::guards_intact(dxd[k])) << c.name << " dx" << k << " written out of bounds";
  }
  for (size_t j = 0; j < cpu.grads.size(); ++j) {
    EXPECT_LT(normalised_error(gpu::download(g.grads[j], false), cpu.grads[j]), p.tol) << c.name << " grad " << j;
    EXPECT_TRUE(gpu::guards_intact(g.grads[j])) << c.name << " grad " << j << " written out of bounds";
  }

  // Parameter gradients accumulate (+=): a second backward doubles them.
  g.layer->backward(ctx, xd, yd, dyd, dxd);
  for (size_t j = 0; j < cpu.grads.size(); ++j) {
    Tensor twice = cast(cpu.grads[j], DType::F64);
    for (int64_t i = 0; i < twice.numel(); ++i) set(twice, i, 2 * get(twice, i));
    EXPECT_LT(normalised_error(gpu::download(g.grads[j], false), twice), 2 * p.tol) << c.name << " accumulated grad " << j;
  }
}

class CudaLayersGpu : public gputest::GpuTestWithParam<CudaLayerCase> {};

DP_GPU_TEST_P(CudaLayersGpu, MatchCpuTwin) {
  match_cpu_twin(GetParam().layer, GetParam().precision, cuda::CudnnApi::Legacy, /*relu=*/false);
}

INSTANTIATE_TEST_SUITE_P(AllLayers, CudaLayersGpu, ::testing::ValuesIn(cuda_cases()),
                         [](const ::testing::TestParamInfo<CudaLayerCase>& i) {
                           return i.param.layer.name + "_" + dtype_name(i.param.precision.compute);
                         });

// Every convolution case on cuDNN's graph API, without and with a folded ReLU, and on the legacy
// API with a folded ReLU (what a layer that falls back from the graph API runs).
struct ConvApiCase {
  LayerCase layer;
  Precision precision;
  cuda::CudnnApi api;
  bool relu;
};

void PrintTo(const ConvApiCase& c, std::ostream* os) {
  *os << c.layer.name << " " << dtype_name(c.precision.compute) << " " << enum_name(c.api) << (c.relu ? " +relu" : "");
}

std::vector<ConvApiCase> conv_api_cases() {
  const std::pair<cuda::CudnnApi, bool> modes[] = {
      {cuda::CudnnApi::Graph, false}, {cuda::CudnnApi::Graph, true}, {cuda::CudnnApi::Legacy, true}};
  std::vector<ConvApiCase> out;
  for (const auto& [api, relu] : modes)
    for (const auto& p : kPrecisions)
      for (const auto& c : layer_cases())
        if (c.type == "conv2d") out.push_back({c, p, api, relu});
  return out;
}

class ConvOnCudnnApisGpu : public gputest::GpuTestWithParam<ConvApiCase> {};

DP_GPU_TEST_P(ConvOnCudnnApisGpu, MatchCpuTwin) {
  match_cpu_twin(GetParam().layer, GetParam().precision, GetParam().api, GetParam().relu);
}

INSTANTIATE_TEST_SUITE_P(ConvCases, ConvOnCudnnApisGpu, ::testing::ValuesIn(conv_api_cases()),
                         [](const ::testing::TestParamInfo<ConvApiCase>& i) {
                           return i.param.layer.name + "_" + dtype_name(i.param.precision.compute) + "_" +
                                  std::string(enum_name(i.param.api)) + (i.param.relu ? "_relu" : "");
                         });

}  // namespace
}  // namespace dp::test
#endif  // DPTRAIN_HAVE_CUDA
