// The Reducer's GPU path (ReducerOptions::gpu) against the CPU Reducer on the same gradients:
// over the single-process communicator and nccl (one GPU), and over the ring on 2 processes
// sharing GPU 0, with f32, bf16 and f16 on the wire, overlap on and off, and allow_unused, and
// ZeRO's reduce-scatter (ReducerOptions::shard: rank r's block of every bucket compared). The
// gradients are written on the compute stream behind a host-side sleep right before each
// on_ready, as backward enqueues them: a reducer that read them before the compute stream got
// there would see the stale values. Every body runs in forked ranks (the test process never
// initialises CUDA); the GPU cases (ReducerGpu) skip without a GPU.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "collectives/reducer/reducer.h"
#include "collectives/reducer/shard_layout.h"
#include "collectives/ring/ring_communicator.h"
#include "models/build.h"
#include "tests/collectives/ring_harness.h"
#include "tests/gpu_test.h"

#ifdef DPTRAIN_HAVE_CUDA
#include "collectives/nccl/nccl_communicator.h"
#include "runtime/cuda/buffers.h"
#include "runtime/cuda/exec_context.h"
#include "runtime/cuda/check.h"
#endif

namespace dp {
namespace {

// The test model on the CPU, or on a GPU with its execution context (a graph on a GPU is built
// with the context its layers run in).
std::unique_ptr<Graph> mlp(Device device, cuda::ExecContext* gpu = nullptr) {
  ModelConfig mc;
  mc.preset = PresetKind::Mlp;
  mc.hidden = {16, 8};
  return models::build_model(mc, {1, 6, 6}, 1, device, DType::F32, gpu);
}

// The GPU tests' layout (host-checked): three buckets, one per layer, so that overlap, a
// bucket launched by finalize and a bucket of unused parameters all occur.
TEST(ReducerGpuModel, HasOneBucketPerLayer) {
  auto g = mlp(Device::cpu());
  SingleProcessCommunicator single;
  ReducerOptions o;
  o.first_bucket_bytes = 64, o.bucket_bytes = 256;
  Reducer r(single, *g, o);
  ASSERT_EQ(r.buckets().size(), 3u);
  EXPECT_EQ(r.buckets()[0].slots, (std::vector<int>{5, 4}));
  EXPECT_EQ(r.buckets()[1].slots, (std::vector<int>{3, 2}));
  EXPECT_EQ(r.buckets()[2].slots, (std::vector<int>{1, 0}));
  EXPECT_EQ(r.buckets()[2].begin, 0);
  EXPECT_EQ(r.buckets()[0].end, 576 + 16 + 128 + 8 + 80 + 10);
}

#ifdef DPTRAIN_HAVE_CUDA

// Rank r's gradient element i; `skip` slots (allow_unused) get none.
float grad_value(int r, int64_t i) { return 0.001f * static_cast<float>((i * 7 + r * 13) % 997) - 0.37f + 0.5f * r; }

void CUDART_CB sleep_1ms(void*) { usleep(1000); }

// One reducer step as backward drives it: nodes last to first; write(node) puts the node's
// gradients in place, then on_ready(node). Nodes in `unused` get neither.
void step(Reducer& red, const Graph& g, const std::vector<int>& unused, const std::function<void(int)>& write) {
  red.prepare();
  for (int i = static_cast<int>(g.nodes().size()) - 1; i >= 0; --i) {
    if (g.nodes()[i].param_slots.empty()) continue;
    if (std::find(unused.begin(), unused.end(), i) != unused.end()) continue;
    write(i);
    red.on_ready(i);
  }
  red.finalize();
}

// Runs the CPU reducer and the GPU reducer (on `gpu_comm`, over ExecContext ctx) on rank r's
// gradients and reports any element that differs (bit for bit). cpu_comm: the CPU reducer's.
// shard: ZeRO's reduce-scatter in both reducers (f32 wire): only rank r's block of each bucket
// (shard_layout.h) is compared, the rest is undefined.
int compare_one(Communicator& cpu_comm, Communicator& gpu_comm, cuda::ExecContext& ctx, int r, DType wire,
                bool overlap, bool with_unused, ringtest::SharedState* s, bool shard = false) {
  auto gc = mlp(Device::cpu());
  auto gg = mlp(Device::cuda(ctx.device()), &ctx);
  const int64_t n = gc->grads().flat().numel();
  ReducerOptions o;
  // Slots (elements): fc1 576 + 16, fc2 128 + 8, fc3 80 + 10: three buckets, one per layer.
  o.first_bucket_bytes = 64, o.bucket_bytes = 256, o.wire = wire, o.overlap = overlap;
  o.allow_unused = with_unused;
  o.shard = shard;
  // With allow_unused, the first layer with parameters reports nothing: the CPU arena holds the
  // zeros zero_grad leaves, the device arena garbage that the reducer must zero.
  std::vector<int> unused;
  if (with_unused)
    for (size_t i = 0; i < gc->nodes().size() && unused.empty(); ++i)
      if (!gc->nodes()[i].param_slots.empty()) unused.push_back(static_cast<int>(i));

  // The values, on the host and (as the source backward would write from) on the device.
  Tensor values = Tensor::zeros({n});
  for (int64_t i = 0; i < n; ++i) values.data<float>()[i] = grad_value(r, i);
  Tensor dev_values = Tensor::zeros({n}, DType::F32, Device::cuda(ctx.device()));
  dev_values.copy_from(values);
  // Stale device gradients: what the reducer would see if it did not wait for compute.
  Tensor stale = Tensor::zeros({n});
  stale.fill_(-7.0);
  gg->grads().flat().copy_from(stale);

  Reducer cpu(cpu_comm, *gc, o);
  step(cpu, *gc, unused, [&](int node) {
    for (int slot : gc->nodes()[node].param_slots) {
      const auto& sl = gc->grads().slot(slot);
      std::memcpy(gc->grads().flat().data<float>() + sl.offset, values.data<float>() + sl.offset, sl.numel * 4);
    }
  });
  ReducerOptions og = o;
  og.gpu = &ctx;
  Reducer gpu(gpu_comm, *gg, og);
  int bad = 0;
  if (gpu.buckets().size() != 3) {
    ringtest::report(s, r, fmt::format("{} buckets, expected 3; ", gpu.buckets().size()));
    ++bad;
  }
  step(gpu, *gg, unused, [&](int node) {
    for (int slot : gg->nodes()[node].param_slots) {
      const auto& sl = gg->grads().slot(slot);
      CHECK_CUDA(cudaLaunchHostFunc(ctx.compute(), sleep_1ms, nullptr));
      CHECK_CUDA(cudaMemcpyAsync(gg->grads().flat().data<float>() + sl.offset, dev_values.data<float>() + sl.offset,
                                 sl.numel * 4, cudaMemcpyDeviceToDevice, ctx.compute()));
    }
  });
  // Read back in the compute stream's order: what the optimizer step would see.
  cuda::PinnedBuffer got(static_cast<size_t>(n) * 4);
  CHECK_CUDA(cudaMemcpyAsync(got.data(), gg->grads().flat().raw(), got.bytes(), cudaMemcpyDeviceToHost, ctx.compute()));
  CHECK_CUDA(cudaStreamSynchronize(ctx.compute()));
  const float* want = gc->grads().flat().data<float>();
  std::vector<char> compared(static_cast<size_t>(n), shard ? 0 : 1);
  if (shard)
    for (const ShardPiece& pc : shard_layout(gpu.buckets(), gpu_comm.size(), r).pieces)
      std::fill_n(compared.begin() + pc.arena_begin, pc.len, 1);
  for (int64_t i = 0; i < n; ++i)
    if (compared[static_cast<size_t>(i)] && std::memcmp(&want[i], got.as<float>() + i, 4) != 0 && bad++ < 3)
      ringtest::report(s, r, fmt::format("{} wire, overlap {}, unused {}, shard {}: element {} is {}, the CPU "
                                         "reducer's {}; ", dtype_name(wire), overlap, with_unused, shard, i,
                                         got.as<float>()[i], want[i]));
  if (gpu.last_step().buckets.empty() && !gpu_comm.device_native()) ringtest::report(s, r, "no step times; ");
  return bad;
}

int compare_all(Communicator& cpu_comm, Communicator& gpu_comm, int r, ringtest::SharedState* s) {
  cuda::ExecContext ctx(0, 1 << 20);
  int bad = 0;
  for (DType wire : {DType::F32, DType::BF16, DType::F16})
    for (bool overlap : {true, false})
      for (bool unused : {false, true}) bad += compare_one(cpu_comm, gpu_comm, ctx, r, wire, overlap, unused, s);
  // ZeRO (train.zero > 0): the reduce-scatter on the comm stream, f32 only (nccl runs on one
  // rank here, where its block is the whole bucket).
  for (bool overlap : {true, false})
    for (bool unused : {false, true})
      bad += compare_one(cpu_comm, gpu_comm, ctx, r, DType::F32, overlap, unused, s, /*shard=*/true);
  return bad == 0 ? 0 : 1;
}

DP_GPU_TEST_IN_CHILD(ReducerGpu, MatchesTheCpuReducerOverTheSingleProcessCommunicator) {
  auto rs = ringtest::run_ranks(
      1,
      [](Bootstrap&, ringtest::SharedState* s, int r) {
        SingleProcessCommunicator single;
        return compare_all(single, single, r, s);
      },
      /*limit_s=*/120);
  EXPECT_EQ(ringtest::all_exited_with(rs, 0), "");
}

DP_GPU_TEST_IN_CHILD(ReducerGpu, MatchesTheCpuReducerOverNcclOnOneGpu) {
  auto rs = ringtest::run_ranks(
      1,
      [](Bootstrap& bs, ringtest::SharedState* s, int r) {
        SingleProcessCommunicator single;
        auto nccl = make_nccl_communicator(bs, 60);
        return compare_all(single, *nccl, r, s);
      },
      /*limit_s=*/120);
  EXPECT_EQ(ringtest::all_exited_with(rs, 0), "");
}

// Two ranks on GPU 0: one ring communicator carries both reducers' buckets (the CPU one's first),
// in the same sizes and order, so the sums are the same additions in the same order.
DP_GPU_TEST_IN_CHILD(ReducerGpu, MatchesTheCpuReducerOverTheRingOn2Ranks) {
  auto rs = ringtest::run_ranks(
      2,
      [](Bootstrap& bs, ringtest::SharedState* s, int r) {
        auto ring = make_ring_communicator(bs, RingOptions{});
        return compare_all(*ring, *ring, r, s);
      },
      /*limit_s=*/180);
  EXPECT_EQ(ringtest::all_exited_with(rs, 0), "");
}

#endif  // DPTRAIN_HAVE_CUDA

}  // namespace
}  // namespace dp
