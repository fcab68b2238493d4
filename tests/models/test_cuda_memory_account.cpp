// The memory breakdown (runtime/memory_account.h) on the GPU: after a bf16 step of a small CNN,
// the bytes the account charged since the start are at least half of, and never more than, what
// the stream-ordered pool holds in addition (the rest: cuDNN/cuBLASLt workspace and layers' own
// device buffers, which are not Storage tensors). Skips without a GPU.
#ifdef DPTRAIN_HAVE_CUDA
#include <gtest/gtest.h>

#include "models/build.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/exec_context.h"
#include "runtime/cuda/memory_pool.h"
#include "runtime/memory_account.h"
#include "tests/gpu_test.h"
#include "tests/models/cuda_layer_harness.h"

namespace dp::test {
namespace {

ModelConfig cnn() {
  auto I = [](int64_t v) { return ArgValue{v}; };
  ModelConfig mc;
  mc.layers = {layer_spec("conv2d", "conv1", {{"out_channels", I(32)}, {"kernel", I(3)}, {"padding", I(1)}}),
               layer_spec("batchnorm2d", "bn1", {}),
               layer_spec("relu", "relu1", {}),
               layer_spec("conv2d", "conv2", {{"out_channels", I(32)}, {"kernel", I(3)}, {"padding", I(1)}}),
               layer_spec("global_avgpool", "gap", {}),
               layer_spec("flatten", "flat", {}),
               layer_spec("linear", "fc", {{"out_features", I(10)}})};
  return mc;
}

DP_GPU_TEST(MemoryAccountGpu, AccountedBytesAreMostOfThePoolsLiveBytes) {
  cuda::ExecContext exec(0, size_t{1} << 20);
  CHECK_CUDA(cudaStreamSynchronize(exec.compute()));
  const uint64_t pool0 = cuda::memory_pool_stats(0).used_bytes;
  const size_t acc0 = memory_breakdown().total;
  auto g = models::build_model(cnn(), {3, 32, 32}, 10, Device::cuda(0), DType::BF16, &exec);
  StepContext ctx{true, 3, 1};
  ctx.gpu = &exec;
  ctx.compute = DType::BF16;
  ctx.channels_last = true;
  Rng rng(7, 0);
  const Tensor x = gpu::upload(gpu::rounded(random_normal({64, 3, 32, 32}, DType::F64, rng), DType::BF16),
                               DType::BF16, true, Device::cuda(0));
  const Tensor dy = gpu::upload(random_normal({64, 10}, DType::F64, rng), DType::F32, false, Device::cuda(0));
  g->zero_grad();
  g->forward(ctx, x);
  g->backward(ctx, dy);
  CHECK_CUDA(cudaStreamSynchronize(exec.compute()));
  const double pool = static_cast<double>(cuda::memory_pool_stats(0).used_bytes - pool0);
  const double accounted = static_cast<double>(memory_breakdown().total - acc0);
  const MemoryBreakdown b = memory_breakdown();
  EXPECT_GT(b.live[static_cast<size_t>(MemoryCategory::ComputeParams)], 0u);  // bf16 weight copies
  EXPECT_LE(accounted, pool) << memory_table(b, static_cast<size_t>(pool), 0);
  EXPECT_GE(accounted, 0.5 * pool) << memory_table(b, static_cast<size_t>(pool), 0);
}

}  // namespace
}  // namespace dp::test
#endif  // DPTRAIN_HAVE_CUDA
