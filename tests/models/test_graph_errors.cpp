// An allocation the graph makes between two layers (a layer's output, its input gradient) names
// that layer when it fails (runtime/graph_errors.cpp): on the CPU a host allocation beyond the
// machine (HostMemoryError), on the GPU (DeviceOomGpu, skipped without one) a batch whose
// activation exceeds the device (DeviceOutOfMemory with the bytes asked, the free memory and what
// to lower), after which the graph still runs a batch that fits.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/gpu_test.h"
#include "models/build.h"
#include "runtime/device_error.h"
#include "runtime/device_memory.h"
#include "runtime/graph.h"
#include "tests/models/layer_harness.h"

#ifdef DPTRAIN_HAVE_CUDA
#include "runtime/cuda/check_runtime.h"
#include "runtime/cuda/exec_context.h"
#endif

namespace dp {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// A 1x1 convolution from one channel to 65536: its output is 65536 times its input (a 1 MiB
// input makes a 64 GiB activation) with only 131072 parameters.
ModelConfig expanding() {
  ModelConfig mc;
  mc.layers = {test::layer_spec("conv2d", "expand", {{"out_channels", int64_t{65536}}, {"kernel", int64_t{1}}}),
               test::layer_spec("relu", "relu", {})};
  return mc;
}

TEST(GraphErrors, AnActivationBeyondTheMachineNamesTheLayerWhoseOutputItIs) {
  // Input [1, 1, 2048, 2048] (16 MiB): the conv's output would be 1 TiB.
  for (CpuBackend backend : {CpuBackend::OneDnn, CpuBackend::Reference}) {
    auto g = models::build_model(expanding(), {1, 2048, 2048}, /*seed=*/3);
    g->set_cpu_backend(backend);
    StepContext ctx;
    try {
      g->forward(ctx, Tensor::zeros({1, 1, 2048, 2048}));
      FAIL() << "a 1 TiB activation was allocated";
    } catch (const HostMemoryError& e) {
      EXPECT_EQ(e.bytes, uint64_t{65536} * 2048 * 2048 * 4);
      EXPECT_EQ(e.context(), "the output of layer 'expand' (conv2d), forward");
      EXPECT_THAT(e.what(), StartsWith("the output of layer 'expand' (conv2d), forward: out of host memory: one tensor "
                                       "of 1099511627776 bytes"));
    }
  }
}

#ifdef DPTRAIN_HAVE_CUDA
DP_GPU_TEST(DeviceOomGpu, AnAbsurdBatchNamesTheLayerItsOutputTheBytesAndTheKeysAndTheGraphGoesOn) {
  cuda::ExecContext exec(0, size_t{64} << 20);
  auto g = models::build_model(expanding(), {1, 64, 64}, /*seed=*/3, Device::cuda(0), DType::F32, &exec);
  StepContext ctx;
  ctx.gpu = &exec;
  // Batch 1024: a 1024 x 65536 x 64 x 64 f32 activation is 1 TiB, beyond any GPU.
  const Tensor big = Tensor::zeros({1024, 1, 64, 64}, DType::F32, Device::cuda(0));
  const uint64_t asked = uint64_t{1024} * 65536 * 64 * 64 * 4;
  const MemoryInfo before = device_memory_info(Device::cuda(0));
  try {
    g->forward(ctx, big);
    FAIL() << "a 1 TiB activation was allocated";
  } catch (const DeviceOutOfMemory& e) {
    EXPECT_EQ(e.info().where, "layer 'expand' (conv2d), forward");
    EXPECT_EQ(e.info().allocation, "its output (a [1024, 65536, 64, 64] f32 tensor)");
    EXPECT_EQ(e.info().asked, asked);
    EXPECT_EQ(e.info().total, before.total);
    EXPECT_THAT(e.what(), StartsWith("device out of memory on cuda:0 [" + identity_string() +
                                     "] in layer 'expand' (conv2d), forward: 1.0 TiB (1099511627776 bytes) asked for "
                                     "its output (a [1024, 65536, 64, 64] f32 tensor), "));
    EXPECT_THAT(e.what(), HasSubstr("; lower train.batch_size (activations grow with it) or train.workspace_mb"));
  }
  // A batch that fits runs (1 GiB of output): the failed allocation left nothing behind.
  const Tensor& y = g->forward(ctx, Tensor::zeros({1, 1, 64, 64}, DType::F32, Device::cuda(0)));
  EXPECT_EQ(y.shape(), (Shape{1, 65536, 64, 64}));
  CHECK_CUDA(cudaStreamSynchronize(exec.compute()));
}
#endif

}  // namespace
}  // namespace dp
