// Issue 30 on a GPU: the GPT preset built for a GPU pads its LM head's logits rows (V = 65 in rows
// of 128: cuBLASLt's output and gradient leading dimension), and against the unpadded CPU graph
// (same seed, ids and labels) gives the logits in each row's first V columns and 0 after them,
// the loss (the device loss with V classes) and every fp32 parameter gradient within f32
// rounding. Skips without a GPU.
#ifdef DPTRAIN_HAVE_CUDA
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "models/build.h"
#include "models/layers/softmax_cross_entropy/softmax_cross_entropy.h"
#include "tests/gpu_test.h"
#include "tests/models/cuda_layer_harness.h"

namespace dp::test {
namespace {

constexpr int64_t kV = 65, kPadded = 128, kT = 8, kN = 3;

ModelConfig small_gpt() {
  ModelConfig m;
  m.preset = PresetKind::Gpt2;
  m.n_layer = 2, m.n_head = 2, m.n_embd = 16, m.block_size = kT, m.vocab_size = kV, m.bias = true;
  return m;
}

Tensor on(const Tensor& host, Device d) {
  Tensor t = Tensor::zeros(host.shape(), host.dtype(), d);
  t.copy_from(host);
  return t;
}

DP_GPU_TEST(CudaGptPaddedHeadGpu, LogitsLossAndGradientsMatchTheUnpaddedCpuGraph) {
  cuda::ExecContext exec(0, size_t{64} << 20);
  const Device dev = Device::cuda(0);
  auto cpu = models::build_model(small_gpt(), {kT}, 5);
  auto gpu = models::build_model(small_gpt(), {kT}, 5, dev, DType::F32, &exec);
  ASSERT_EQ(cpu->output_shape(), (Shape{kT, kV}));
  ASSERT_EQ(gpu->output_shape(), (Shape{kT, kPadded}));
  ASSERT_EQ(models::output_width(*gpu), kV);
  Rng rng(3, 1);
  Tensor x = Tensor::zeros({kN, kT}, DType::I32), y = Tensor::zeros({kN * kT}, DType::I32);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<int32_t>()[i] = static_cast<int32_t>(rng.below(kV));
  for (int64_t i = 0; i < y.numel(); ++i) y.data<int32_t>()[i] = static_cast<int32_t>(rng.below(kV));
  const models::SoftmaxCrossEntropy loss(0.1);

  StepContext cctx{true, 3, 1}, gctx{true, 3, 1};
  gctx.gpu = &exec;
  cpu->zero_grad();
  const Tensor zc = cpu->forward(cctx, x).clone().reshape({kN * kT, kV});
  Tensor dzc = Tensor::zeros({kN * kT, kV});
  const double lc = loss.forward_backward(zc, y, &dzc);
  cpu->backward(cctx, dzc.reshape({kN, kT, kV}));

  gpu->zero_grad();
  const Tensor& logits = gpu->forward(gctx, on(x, dev));
  const Tensor zg = logits.reshape({kN * kT, kPadded});
  Tensor dzg = Tensor::zeros({kN * kT, kPadded}, DType::F32, dev);
  const double lg = loss.forward_backward(zg, on(y, dev), &dzg, exec.compute(), kV);
  EXPECT_NEAR(lg, lc, 2e-5 * std::max(1.0, std::fabs(lc)));
  Tensor zh = Tensor::zeros(zg.shape()), dzh = Tensor::zeros(dzg.shape());
  zh.copy_from(zg);
  dzh.copy_from(dzg);
  for (int64_t r = 0; r < kN * kT; ++r)
    for (int64_t k = 0; k < kPadded; ++k) {
      const float got = zh.data<float>()[r * kPadded + k], g = dzh.data<float>()[r * kPadded + k];
      if (k >= kV) {
        ASSERT_EQ(got, 0.0f) << "logits padding " << r << "," << k;
        ASSERT_EQ(g, 0.0f) << "gradient padding " << r << "," << k;
      } else {
        ASSERT_NEAR(got, zc.data<float>()[r * kV + k], 1e-4) << "logits " << r << "," << k;
      }
    }
  gpu->backward(gctx, dzg.reshape(logits.shape()));
  for (int s = 0; s < cpu->grads().size(); ++s)
    EXPECT_LT(normalised_error(gpu::download(gpu->grads().tensor(s), false), cpu->grads().tensor(s)), 1e-4)
        << cpu->grads().slot(s).name;
}

}  // namespace
}  // namespace dp::test
#endif  // DPTRAIN_HAVE_CUDA
