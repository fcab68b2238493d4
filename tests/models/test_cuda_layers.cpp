// Every layer case on the GPU against its CPU twin: fp32 (NCHW) and bf16/fp16 (NHWC, channels
// last), the forward output, the input and parameter gradients, and the running statistics,
// on fresh random inputs, with guard regions around every device tensor. The CPU reference
// (f64) runs on the very values the GPU sees: inputs, parameters and dy rounded through the
// compute dtype. Skips without a GPU.
#ifdef DPTRAIN_HAVE_CUDA
#include <gtest/gtest.h>

#include <random>

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
    for (const auto& c : layer_cases())
      if (c.cuda) out.push_back({c, p});  // the GPT layers have no CUDA path yet
  return out;
}

class CudaLayers : public ::testing::TestWithParam<CudaLayerCase> {};

TEST_P(CudaLayers, MatchCpuTwin) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU";
  const LayerCase& c = GetParam().layer;
  const Precision& p = GetParam().precision;
  const uint64_t seed = (uint64_t{std::random_device{}()} << 32) | std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  const Device dev = Device::cuda(0);
  cuda::ExecContext exec(0, size_t{64} << 20);

  // CPU reference in f64 on values representable in the compute dtype.
  TestLayer cpu = make_test_layer(c, DType::F64, seed);
  for (auto& t : cpu.params) t.copy_from(gpu::rounded(t, cpu.layer->low_precision_params() ? p.compute : DType::F32));
  gpu::GpuLayer g(c, cpu, p.compute, dev);
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
  Tensor yd = gpu::guarded_zeros(batched(c.batch, g.out), p.compute, dev);
  g.layer->forward(ctx, xd, yd);
  const Tensor y = cpu.forward(cpu_ctx, x);
  EXPECT_LT(normalised_error(gpu::download(yd, p.channels_last), y), p.tol) << c.name << " output";
  EXPECT_TRUE(gpu::guards_intact(yd)) << c.name << " output written out of bounds";
  for (size_t j = 0; j < cpu.buffers.size(); ++j)
    if (is_floating(cpu.buffers[j].dtype()))
      EXPECT_LT(normalised_error(gpu::download(g.buffers[j], false), cpu.buffers[j]), p.tol) << c.name << " buffer " << j;
    else
      EXPECT_EQ(normalised_error(gpu::download(g.buffers[j], false), cast(cpu.buffers[j], DType::F64)), 0) << c.name;

  const Tensor dy = gpu::rounded(random_normal(y.shape(), DType::F64, rng), p.compute);
  const Tensor dyd = gpu::upload(dy, p.compute, p.channels_last, dev);
  std::vector<Tensor> dxd;
  for (const auto& t : xd) dxd.push_back(gpu::guarded_zeros(t.shape(), p.compute, dev));
  g.layer->backward(ctx, xd, yd, dyd, dxd);
  const std::vector<Tensor> dx = cpu.backward(cpu_ctx, x, y, dy);
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

INSTANTIATE_TEST_SUITE_P(AllLayers, CudaLayers, ::testing::ValuesIn(cuda_cases()),
                         [](const ::testing::TestParamInfo<CudaLayerCase>& i) {
                           return i.param.layer.name + "_" + dtype_name(i.param.precision.compute);
                         });

}  // namespace
}  // namespace dp::test
#endif  // DPTRAIN_HAVE_CUDA
