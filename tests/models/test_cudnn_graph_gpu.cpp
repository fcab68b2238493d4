// A whole CNN with its convolutions on cuDNN's graph API (train.cudnn_api = "graph"): ReLUs folded
// into the convolutions that feed them (and only those), a bias fused or added, a residual join,
// pooling, flatten and linear; its output and every fp32 master gradient against the same graph
// on the CPU and on the legacy API, in f32, bf16 and f16, over two steps (the second reuses the
// cached plans); and the plan cache shared by layers of one shape. Skips without a GPU.
#ifdef DPTRAIN_HAVE_CUDA
#include <gtest/gtest.h>

#include "tests/gpu_test.h"
#include "models/build.h"
#include "runtime/cuda/cudnn_graph.h"
#include "tests/models/cuda_layer_harness.h"

namespace dp::test {
namespace {

// conv1 -> relu1 (folded) -> conv2 (no bias) -> relu2 (folded), feeding a join with pool's output
// too; conv3's output has two consumers (relu3 and the join), so relu3 is not folded.
ModelConfig folding_cnn() {
  auto I = [](int64_t v) { return ArgValue{v}; };
  ModelConfig mc;
  mc.layers = {layer_spec("conv2d", "conv1", {{"out_channels", I(8)}, {"kernel", I(3)}, {"padding", I(1)}}),
               layer_spec("relu", "relu1", {}),
               layer_spec("maxpool2d", "pool", {{"kernel", I(2)}}),
               layer_spec("conv2d", "conv2", {{"out_channels", I(8)}, {"kernel", I(3)}, {"padding", I(1)}, {"bias", ArgValue{false}}}),
               layer_spec("relu", "relu2", {}),
               layer_spec("conv2d", "conv3", {{"out_channels", I(8)}, {"kernel", I(1)}}, {"pool"}),
               layer_spec("relu", "relu3", {}),
               layer_spec("add", "join", {}, {"relu2", "conv3"}),
               layer_spec("add", "join2", {}, {"join", "relu3"}),
               layer_spec("flatten", "flat", {}),
               layer_spec("linear", "fc", {{"out_features", I(5)}})};
  return mc;
}

struct Mode {
  DType compute;
  double tol;
};

class CudnnGraphModelGpu : public gputest::GpuTestWithParam<Mode> {};

// Output and master gradients of `g` after forward and backward on x and dy.
struct StepResult {
  Tensor y;
  std::vector<Tensor> grads;
};

StepResult gpu_step(Graph& g, cuda::ExecContext& exec, DType compute, const Tensor& x, const Tensor& dy) {
  StepContext ctx{true, 3, 1};
  ctx.gpu = &exec;
  ctx.compute = compute;
  ctx.channels_last = compute != DType::F32;
  g.zero_grad();
  StepResult r;
  r.y = gpu::download(g.forward(ctx, gpu::upload(x, compute, ctx.channels_last, Device::cuda(0))), false);
  g.backward(ctx, gpu::upload(dy, DType::F32, false, Device::cuda(0)));
  for (int s = 0; s < g.grads().size(); ++s) r.grads.push_back(gpu::download(g.grads().tensor(s), false));
  return r;
}

DP_GPU_TEST_P(CudnnGraphModelGpu, FoldsReluIntoConvolutionsAndMatchesTheCpuAndTheLegacyApi) {
  const Mode m = GetParam();
  cuda::ExecContext legacy_exec(0, size_t{64} << 20), graph_exec(0, size_t{64} << 20);
  graph_exec.set_cudnn_api(cuda::CudnnApi::Graph);
  const Shape in{3, 12, 12};
  auto cpu = models::build_model(folding_cnn(), in, 5);
  auto legacy = models::build_model(folding_cnn(), in, 5, Device::cuda(0), m.compute, &legacy_exec);
  auto graph = models::build_model(folding_cnn(), in, 5, Device::cuda(0), m.compute, &graph_exec);
  graph->set_gpu_fusion(true);  // train.gpu_fusion: the folds this test checks
  legacy->set_gpu_fusion(true);
  EXPECT_EQ(graph->gpu_plan_summary(), "convolutions: cuDNN's graph API; GPU fusion: 2 layers apply the ReLU, residual "
                                       "add + ReLU or GELU after them: [conv1+relu1 conv2+relu2]");
  EXPECT_EQ(legacy->gpu_plan_summary(),
            "convolutions: cuDNN's legacy API; GPU fusion: 0 layers apply the ReLU, residual add + ReLU or GELU after "
            "them: []");
  if (m.compute != DType::F32)  // the CPU computes on the 16-bit-rounded weights the GPU uses
    for (const auto& node : cpu->nodes())
      if (node.layer->low_precision_params())
        for (const auto& p : node.layer->params()) p.copy_from(cast(gpu::rounded(p, m.compute), DType::F32));

  Rng rng(7, 0);
  for (int step = 0; step < 2; ++step) {  // the second step runs on the cached plans
    SCOPED_TRACE(::testing::Message() << "step " << step);
    const Tensor x = gpu::rounded(random_normal({4, 3, 12, 12}, DType::F64, rng), m.compute);
    const Tensor dy = random_normal({4, 5}, DType::F64, rng);
    StepContext cctx{true, 3, 1};
    cpu->zero_grad();
    const Tensor ycpu = cpu->forward(cctx, cast(x, DType::F32)).clone();
    cpu->backward(cctx, cast(dy, DType::F32));
    const StepResult l = gpu_step(*legacy, legacy_exec, m.compute, x, dy);
    const StepResult g = gpu_step(*graph, graph_exec, m.compute, x, dy);
    EXPECT_LT(normalised_error(g.y, ycpu), m.tol) << "output against the CPU";
    EXPECT_LT(normalised_error(g.y, l.y), m.tol) << "output against the legacy API";
    for (int s = 0; s < cpu->grads().size(); ++s) {
      EXPECT_LT(normalised_error(g.grads[s], cpu->grads().tensor(s)), m.tol) << cpu->grads().slot(s).name << " (CPU)";
      EXPECT_LT(normalised_error(g.grads[s], l.grads[s]), m.tol) << cpu->grads().slot(s).name << " (legacy API)";
    }
  }
  // Three shapes of convolution, each with a forward, data- and filter-gradient plan (conv1 has
  // no input gradient): 8 choices, shared by the two steps.
  EXPECT_EQ(graph_exec.graph_plans().size(), 8u);
}

INSTANTIATE_TEST_SUITE_P(Precisions, CudnnGraphModelGpu,
                         ::testing::Values(Mode{DType::F32, 1e-4}, Mode{DType::BF16, 4e-2}, Mode{DType::F16, 6e-3}),
                         [](const ::testing::TestParamInfo<Mode>& i) { return std::string(dtype_name(i.param.compute)); });

}  // namespace
}  // namespace dp::test
#endif  // DPTRAIN_HAVE_CUDA
