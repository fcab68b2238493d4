// The memory breakdown (runtime/memory_account.h) on the GPU: after a bf16 step of a small CNN,
// the bytes the account charged since the start are at least half of, and never more than, what
// the stream-ordered pool holds in addition (the rest: cuDNN/cuBLASLt workspace and layers' own
// device buffers, which are not Storage tensors); and a smaller batch adds no activation bytes.
// Skips without a GPU.
#ifdef DPTRAIN_HAVE_CUDA
#include <gtest/gtest.h>

#include <cmath>

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

// A smaller batch (the last partial one, an evaluation's) runs in the largest one's bytes
// (runtime/tensor.h ensure_capacity): the account's live activations stay what batch 64 left, in
// an evaluation forward of batch 40 and in a training step of it, and batch 40's scores are batch
// 64's first 40 rows (evaluation mode: per sample; bf16, so within its rounding).
DP_GPU_TEST(MemoryAccountGpu, ASmallerBatchRunsInTheLargestBatchsActivations) {
  cuda::ExecContext exec(0, size_t{64} << 20);
  auto g = models::build_model(cnn(), {3, 32, 32}, 10, Device::cuda(0), DType::BF16, &exec);
  StepContext train{true, 3, 1}, eval{false, 3, 1};
  for (StepContext* c : {&train, &eval}) c->gpu = &exec, c->compute = DType::BF16, c->channels_last = true;
  Rng rng(7, 0);
  const Tensor host_x = gpu::rounded(random_normal({64, 3, 32, 32}, DType::F64, rng), DType::BF16);
  const Tensor x = gpu::upload(host_x, DType::BF16, true, Device::cuda(0));
  const Tensor x40 = gpu::upload(host_x.narrow0(0, 40), DType::BF16, true, Device::cuda(0));
  const Tensor dy = gpu::upload(random_normal({64, 10}, DType::F64, rng), DType::F32, false, Device::cuda(0));
  g->zero_grad();
  g->forward(train, x);
  g->backward(train, dy);
  const Tensor y64 = gpu::download(g->forward(eval, x), false);
  CHECK_CUDA(cudaStreamSynchronize(exec.compute()));
  const size_t acts = memory_breakdown().live[static_cast<size_t>(MemoryCategory::Activations)];
  const Tensor y40 = gpu::download(g->forward(eval, x40), false);
  CHECK_CUDA(cudaStreamSynchronize(exec.compute()));
  EXPECT_EQ(memory_breakdown().live[static_cast<size_t>(MemoryCategory::Activations)], acts);
  ASSERT_EQ(y40.shape(), (Shape{40, 10}));
  for (int64_t i = 0; i < 40 * 10; ++i)
    EXPECT_NEAR(y40.data<double>()[i], y64.data<double>()[i], 2e-2 * (1 + std::abs(y64.data<double>()[i]))) << i;
  g->forward(train, x40);
  g->backward(train, dy.narrow0(0, 40));
  CHECK_CUDA(cudaStreamSynchronize(exec.compute()));
  EXPECT_EQ(memory_breakdown().live[static_cast<size_t>(MemoryCategory::Activations)], acts);
}

}  // namespace
}  // namespace dp::test
#endif  // DPTRAIN_HAVE_CUDA
