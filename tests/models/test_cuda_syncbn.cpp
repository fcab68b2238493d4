// SyncBN's GPU path (BatchNorm2d with set_sync(true)) against its CPU twin, both reducing through
// TwinRanks: a communicator of two ranks whose peer holds the same batch, so an all-reduce sum
// doubles the tensor (read back and written through host memory when it is on the device, the
// communicator's device-tensor contract). The global batch is then two copies of this one: same
// mean and biased variance, twice the count (the running variance's M / (M - 1) differs from
// plain BN's), and the CPU path computes exactly that. Checks the output, the running
// statistics, num_batches_tracked, dx, the parameter gradients (accumulated), and that the GPU
// path all-reduces device tensors three times per step (sums + count, squared deviations,
// gradient sums). Skips without a GPU.
#ifdef DPTRAIN_HAVE_CUDA
#include <gtest/gtest.h>

#include <random>

#include "collectives/communicator.h"
#include "models/layers/batchnorm2d/batchnorm2d.h"
#include "tests/gpu_test.h"
#include "tests/models/cuda_layer_harness.h"

namespace dp::test {
namespace {

class TwinRanks : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  const char* backend() const override { return "twin"; }
  WorkPtr allreduce_async(const Tensor& t, ReduceOp op) override {
    EXPECT_EQ(op, ReduceOp::Sum);
    EXPECT_EQ(t.dtype(), DType::F64);
    if (t.device().is_cuda()) ++device_allreduces;
    Tensor host = Tensor::zeros(t.shape(), DType::F64);
    host.copy_from(t);
    for (int64_t i = 0; i < host.numel(); ++i) host.data<double>()[i] *= 2;
    t.copy_from(host);
    auto w = std::make_shared<Work>(++seq_, "twin allreduce");
    w->finish();
    return w;
  }
  WorkPtr broadcast_async(const Tensor&, int) override { throw DpError("TwinRanks: broadcast"); }
  WorkPtr allgather_async(const Tensor&, const Tensor&) override { throw DpError("TwinRanks: allgather"); }
  WorkPtr reduce_scatter_async(const Tensor&, const Tensor&, ReduceOp) override {
    throw DpError("TwinRanks: reduce_scatter");
  }
  WorkPtr barrier_async() override { throw DpError("TwinRanks: barrier"); }
  void abort(const std::string&) override {}
  int device_allreduces = 0;

 private:
  uint64_t seq_ = 0;
};

struct Precision {
  DType compute;
  bool channels_last;
  double tol;  // as tests/models/test_cuda_layers.cpp
};

class CudaSyncBnGpu : public gputest::GpuTestWithParam<Precision> {};

DP_GPU_TEST_P(CudaSyncBnGpu, MatchesTheCpuSyncPathOverTwoRanks) {
  const Precision p = GetParam();
  const uint64_t seed = (uint64_t{std::random_device{}()} << 32) | std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  const LayerCase c{"syncbn", "batchnorm2d", {{"momentum", ArgValue{0.2}}}, {{5, 6, 7}}, 3, true};
  const Device dev = Device::cuda(0);
  cuda::ExecContext exec(0, size_t{64} << 20);
  TwinRanks cpu_comm, gpu_comm;

  TestLayer cpu = make_test_layer(c, DType::F64, seed);
  for (auto& t : cpu.params) t.copy_from(gpu::rounded(t, DType::F32));
  gpu::GpuLayer g(c, cpu, p.compute, dev);
  dynamic_cast<models::BatchNorm2d&>(*cpu.layer).set_sync(true);
  dynamic_cast<models::BatchNorm2d&>(*g.layer).set_sync(true);
  Rng rng(seed, 1);
  std::vector<Tensor> x = cpu.random_inputs(c.batch, rng);
  for (auto& t : x) t = gpu::rounded(t, p.compute);

  StepContext ctx = case_ctx(c);
  ctx.gpu = &exec;
  ctx.compute = p.compute;
  ctx.channels_last = p.channels_last;
  ctx.comm = &gpu_comm;
  StepContext cpu_ctx = case_ctx(c);
  cpu_ctx.comm = &cpu_comm;

  std::vector<Tensor> xd{gpu::upload(x[0], p.compute, p.channels_last, dev)};
  Tensor yd = gpu::guarded_zeros(with_batch(c.batch, g.out), p.compute, dev);
  g.layer->forward(ctx, xd, yd);
  const Tensor y = cpu.forward(cpu_ctx, x);
  EXPECT_EQ(gpu_comm.device_allreduces, 2);
  EXPECT_LT(normalised_error(gpu::download(yd, p.channels_last), y), p.tol) << "output";
  EXPECT_TRUE(gpu::guards_intact(yd));
  for (size_t j = 0; j < cpu.buffers.size(); ++j)
    if (is_floating(cpu.buffers[j].dtype()))
      EXPECT_LT(normalised_error(gpu::download(g.buffers[j], false), cpu.buffers[j]), p.tol) << "buffer " << j;
    else
      EXPECT_EQ(normalised_error(gpu::download(g.buffers[j], false), gpu::to_f64(cpu.buffers[j])), 0);

  const Tensor dy = gpu::rounded(random_normal(y.shape(), DType::F64, rng), p.compute);
  const Tensor dyd = gpu::upload(dy, p.compute, p.channels_last, dev);
  std::vector<Tensor> dxd{gpu::guarded_zeros(x[0].shape(), p.compute, dev)};
  g.layer->backward(ctx, xd, yd, dyd, dxd);
  const std::vector<Tensor> dx = cpu.backward(cpu_ctx, x, y, dy);
  EXPECT_EQ(gpu_comm.device_allreduces, 3);
  EXPECT_LT(normalised_error(gpu::download(dxd[0], p.channels_last), dx[0]), p.tol) << "dx";
  EXPECT_TRUE(gpu::guards_intact(dxd[0]));
  for (size_t j = 0; j < cpu.grads.size(); ++j) {
    EXPECT_LT(normalised_error(gpu::download(g.grads[j], false), cpu.grads[j]), p.tol) << "grad " << j;
    EXPECT_TRUE(gpu::guards_intact(g.grads[j]));
  }
  // Weight and bias gradients stay local and accumulate: a second backward doubles them.
  g.layer->backward(ctx, xd, yd, dyd, dxd);
  for (size_t j = 0; j < cpu.grads.size(); ++j) {
    Tensor twice = cast(cpu.grads[j], DType::F64);
    for (int64_t i = 0; i < twice.numel(); ++i) set(twice, i, 2 * get(twice, i));
    EXPECT_LT(normalised_error(gpu::download(g.grads[j], false), twice), 2 * p.tol) << "accumulated grad " << j;
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, CudaSyncBnGpu,
                         ::testing::Values(Precision{DType::F32, false, 2e-5}, Precision{DType::BF16, true, 1.6e-2},
                                           Precision{DType::F16, true, 2.5e-3}),
                         [](const ::testing::TestParamInfo<Precision>& i) { return dtype_name(i.param.compute); });

}  // namespace
}  // namespace dp::test
#endif  // DPTRAIN_HAVE_CUDA
