// A whole graph on the GPU against the same graph on the CPU: a small residual CNN (conv, batch
// norm, ReLU, max pooling, a residual join with two consumers, global average pooling, flatten,
// dropout, linear), the same seed, input and output gradient: the f32 output and every fp32 master
// gradient agree in fp32, and within 16-bit rounding in bf16/fp16 (channels last, 16-bit weight
// copies refreshed from the fp32 masters, gradients widened into the fp32 arena). Skips without
// a GPU.
#ifdef DPTRAIN_HAVE_CUDA
#include <gtest/gtest.h>

#include "models/build.h"
#include "tests/gpu_test.h"
#include "tests/models/cuda_layer_harness.h"

namespace dp::test {
namespace {

ModelConfig residual_cnn() {
  auto I = [](int64_t v) { return ArgValue{v}; };
  ModelConfig mc;
  mc.layers = {layer_spec("conv2d", "conv1", {{"out_channels", I(8)}, {"kernel", I(3)}, {"padding", I(1)}}),
               layer_spec("batchnorm2d", "bn1", {}),
               layer_spec("relu", "relu1", {}),
               layer_spec("maxpool2d", "pool", {{"kernel", I(2)}}),
               layer_spec("conv2d", "conv2", {{"out_channels", I(8)}, {"kernel", I(3)}, {"padding", I(1)}, {"bias", ArgValue{false}}}),
               layer_spec("add", "join", {}, {"conv2", "pool"}),
               layer_spec("global_avgpool", "gap", {}),
               layer_spec("flatten", "flat", {}),
               layer_spec("dropout", "drop", {{"p", ArgValue{0.25}}}),
               layer_spec("linear", "fc", {{"out_features", I(5)}})};
  return mc;
}

// The model follows the graph's rules (e.g. linear takes [C], so a flatten after the pooling)
// on the CPU, so CI finds a rule it breaks before a GPU run does.
TEST(CudaGraphModel, BuildsOnTheCpu) {
  auto g = models::build_model(residual_cnn(), {3, 12, 12}, 5);
  EXPECT_EQ(g->nodes().size(), residual_cnn().layers.size());
  Rng rng(7, 0);
  const Tensor x = cast(random_normal({4, 3, 12, 12}, DType::F64, rng), DType::F32);
  StepContext ctx{true, 3, 1};
  EXPECT_EQ(g->forward(ctx, x).shape(), (Shape{4, 5}));
}

struct Mode {
  DType compute;
  double tol;
};

class CudaGraphGpu : public gputest::GpuTestWithParam<Mode> {};

DP_GPU_TEST_P(CudaGraphGpu, ForwardAndGradientsMatchTheCpuGraph) {
  const Mode m = GetParam();
  cuda::ExecContext exec(0, size_t{64} << 20);
  const Shape in{3, 12, 12};
  auto cpu = models::build_model(residual_cnn(), in, 5);
  auto gpu = models::build_model(residual_cnn(), in, 5, Device::cuda(0), m.compute, &exec);
  Rng rng(7, 0);
  // Inputs and the output gradient representable in the compute dtype, so both graphs see them.
  const Tensor x = gpu::rounded(random_normal({4, 3, 12, 12}, DType::F64, rng), m.compute);
  const Tensor dy = random_normal({4, 5}, DType::F64, rng);
  // With 16-bit compute the CPU graph runs on the 16-bit-rounded weights the GPU computes with.
  if (m.compute != DType::F32) {
    for (const auto& node : cpu->nodes())
      if (node.layer->low_precision_params())
        for (const auto& p : node.layer->params()) p.copy_from(cast(gpu::rounded(p, m.compute), DType::F32));
  }
  StepContext cctx{true, 3, 1};
  StepContext gctx{true, 3, 1};
  gctx.gpu = &exec;
  gctx.compute = m.compute;
  gctx.channels_last = m.compute != DType::F32;

  cpu->zero_grad();
  const Tensor ycpu = cpu->forward(cctx, cast(x, DType::F32)).clone();
  cpu->backward(cctx, cast(dy, DType::F32));
  gpu->zero_grad();
  const Tensor& ygpu = gpu->forward(gctx, gpu::upload(x, m.compute, gctx.channels_last, Device::cuda(0)));
  EXPECT_EQ(ygpu.dtype(), DType::F32);
  EXPECT_LT(normalised_error(gpu::download(ygpu, false), ycpu), m.tol) << "output";
  gpu->backward(gctx, gpu::upload(dy, DType::F32, false, Device::cuda(0)));
  for (int s = 0; s < cpu->grads().size(); ++s)
    EXPECT_LT(normalised_error(gpu::download(gpu->grads().tensor(s), false), cpu->grads().tensor(s)), m.tol)
        << cpu->grads().slot(s).name;
  for (size_t b = 0; b < cpu->buffers().size(); ++b) {
    if (!is_floating(cpu->buffers()[b].tensor.dtype())) continue;
    EXPECT_LT(normalised_error(gpu::download(gpu->buffers()[b].tensor, false), cpu->buffers()[b].tensor), m.tol)
        << cpu->buffers()[b].name;
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, CudaGraphGpu,
                         ::testing::Values(Mode{DType::F32, 1e-4}, Mode{DType::BF16, 4e-2}, Mode{DType::F16, 6e-3}),
                         [](const ::testing::TestParamInfo<Mode>& i) { return std::string(dtype_name(i.param.compute)); });

}  // namespace
}  // namespace dp::test
#endif  // DPTRAIN_HAVE_CUDA
