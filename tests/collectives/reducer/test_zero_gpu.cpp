// ZeRO stage 1's step with the arenas and the shard optimizer on a GPU (collectives/reducer/
// zero_shard.h, launch/weight_update.cpp's ShardedUpdate order), against the same ZeroShard on
// host arenas over the same ring communicator, on 2 and 3 forked ranks sharing GPU 0. Buckets
// whose pieces cut the arena unevenly, some above the ring's small-message bound (the in-place
// ring pair, staged through pinned memory) and some below (the all-reduce's fallback). Per step:
// the gradients written on the stream behind a host-side sleep, each bucket reduce-scattered by the
// stream-ordered form (the Reducer's under train.zero), the clip over the pieces (one all-reduce),
// the pieces' AdamW update on the stream, the parameters' all-gather after it. After 3 steps every
// parameter is within 1 ulp of the host run's (0 expected: the fused kernels round as the CPU
// twins do, tests/kernels/test_cuda_optim.cpp), the norms are equal, and stream_state from the
// device state hands the sink what it hands the host run's. GPU only (ZeroGpu skips without);
// CI runs it on the CUDA emulator (test_collectives_emu), which proves the bytes but not the
// stream order (the emulator runs all work at enqueue): the order is a GPU run's to prove.
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/ranges.h>

#include "collectives/reducer/buckets.h"
#include "collectives/reducer/zero_shard.h"
#include "collectives/ring/ring_communicator.h"
#include "runtime/optim/grad_clip.h"
#include "runtime/optim/optimizer.h"
#include "tests/collectives/ring_harness.h"
#include "tests/gpu_test.h"

#ifdef DPTRAIN_HAVE_CUDA
#include "runtime/cuda/check.h"
#include "runtime/cuda/stream.h"
#include "tests/kernels/cuda_test_util.h"
#endif

namespace dp {
namespace {

// Parameters of 1200, 7, 1800, 996, 1000 and 5003 elements; buckets closed at 1000, then 3000.
std::vector<Bucket> test_buckets() { return assign_buckets({1200, 7, 1800, 996, 1000, 5003}, 1000, 3000); }
constexpr int64_t kN = 1200 + 7 + 1800 + 996 + 1000 + 5003;

#ifdef DPTRAIN_HAVE_CUDA

float value(uint64_t seed, int r, int64_t i) {
  return 0.001f * static_cast<float>((i * 37 + static_cast<int64_t>(seed) * 101 + r * 13) % 1999) - 0.9f;
}

Tensor host_values(uint64_t seed, int r) {
  Tensor t = Tensor::zeros({kN});
  for (int64_t i = 0; i < kN; ++i) t.data<float>()[i] = value(seed, r, i);
  return t;
}

void CUDART_CB sleep_2ms(void*) { usleep(2000); }

// What one run leaves: the parameters, the norms, and stream_state's bytes per (slot, begin).
struct Run {
  std::vector<float> params;
  std::vector<double> norms;
  std::map<std::pair<int, int64_t>, std::vector<float>> state;
};

// Three ZeRO steps of rank r over comm: on the host (stream null) or on cuda:0 with `stream`.
Run zero_steps(Communicator& comm, int r, cuda::CudaStream* stream) {
  const Device dev = stream ? Device::cuda(0) : Device::cpu();
  void* s = stream ? static_cast<void*>(stream->get()) : nullptr;
  const std::vector<Bucket> buckets = test_buckets();
  ZeroShard shard(comm, buckets, kN, 1);
  auto opt = optim::make_adamw(shard.layout().numel, {});
  opt->place(dev, s);
  optim::GradClipper clipper(0.5);  // the gradients' norm is far above: every step clips
  Tensor params = Tensor::zeros({kN}, DType::F32, dev);
  params.copy_from(host_values(1, 0));  // the same start on every rank
  Tensor grads = Tensor::zeros({kN}, DType::F32, dev);
  // The device gradients' source, alive for the whole run: a device tensor's free synchronises the
  // device (runtime/device_memory_cuda.cpp), which would finish the write below before the
  // collectives are issued and hide a collective that ignores the stream.
  const Tensor src = stream ? Tensor::zeros({kN}, DType::F32, dev) : Tensor();
  Run run;
  for (int step = 0; step < 3; ++step) {
    const Tensor g = host_values(10 + step, r);
    if (stream) {  // written on the stream behind a sleep: the collectives must wait for it
      src.copy_from(g);  // synchronous, before the sleep is enqueued
      CHECK_CUDA(cudaLaunchHostFunc(stream->get(), sleep_2ms, nullptr));
      CHECK_CUDA(cudaMemcpyAsync(grads.raw(), src.raw(), grads.nbytes(), cudaMemcpyDeviceToDevice, stream->get()));
    } else {
      grads.copy_from(g);
    }
    for (const Bucket& b : buckets) {
      const Tensor slice = grads.slice_flat(b.begin, {b.end - b.begin});
      (stream ? comm.reduce_scatter_blocks_stream_async(slice, ReduceOp::Avg, s)
              : comm.reduce_scatter_blocks_async(slice, ReduceOp::Avg))
          ->wait();
    }
    run.norms.push_back(shard.clip(grads, clipper, s));
    shard.step(*opt, params, grads, 0.01);
    shard.gather_params(params, s);
  }
  Tensor host = Tensor::zeros({kN});
  host.copy_from(params);
  run.params.assign(host.data<float>(), host.data<float>() + kN);
  shard.stream_state(*opt, [&](int slot, int64_t begin, const float* data, int64_t len) {
    run.state[{slot, begin}].assign(data, data + len);
  });
  return run;
}

// Elements of `got` more than 1 ulp from `want` (and the first few reported).
int64_t far_elements(const std::vector<float>& got, const std::vector<float>& want, const std::string& what,
                     ringtest::SharedState* s, int r) {
  if (got.size() != want.size()) {
    ringtest::report(s, r, fmt::format("{}: {} elements, the host's {}; ", what, got.size(), want.size()));
    return 1;
  }
  int64_t far = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (kernels::cuda::test::ulp_distance(got[i], want[i]) > 1 && far++ < 3)
      ringtest::report(s, r, fmt::format("{}[{}] = {}, the host's {}; ", what, i, got[i], want[i]));
  return far;
}

int compare_runs(Bootstrap& bs, ringtest::SharedState* s, int r) {
  RingOptions ro;
  ro.small_bytes = 10000;  // the buckets of 5,003 and 3,796 elements take the ring pair, 1,207 the fallback
  auto comm = make_ring_communicator(bs, ro);
  const Run host = zero_steps(*comm, r, nullptr);
  cuda::CudaStream stream(0);
  const Run dev = zero_steps(*comm, r, &stream);
  int64_t bad = far_elements(dev.params, host.params, "parameter", s, r);
  if (dev.norms != host.norms) {
    ringtest::report(s, r, fmt::format("norms {} on the GPU, {} on the host; ", fmt::join(dev.norms, " "),
                                       fmt::join(host.norms, " ")));
    ++bad;
  }
  if (dev.state.size() != host.state.size() || host.state.size() != 2 * test_buckets().size()) {
    ringtest::report(s, r, fmt::format("{} state pieces streamed on the GPU, {} on the host; ", dev.state.size(),
                                       host.state.size()));
    ++bad;
  }
  for (const auto& [key, want] : host.state) {
    const auto it = dev.state.find(key);
    bad += it == dev.state.end() ? 1
                                 : far_elements(it->second, want, fmt::format("state {} at {}", key.first, key.second),
                                                s, r);
  }
  return bad == 0 ? 0 : 1;
}

DP_GPU_TEST_IN_CHILD(ZeroGpu, StepOnTheDeviceEqualsTheHostStepOn2Ranks) {
  auto rs = ringtest::run_ranks(2, compare_runs, /*limit_s=*/120);
  EXPECT_EQ(ringtest::all_exited_with(rs, 0), "");
}

DP_GPU_TEST_IN_CHILD(ZeroGpu, StepOnTheDeviceEqualsTheHostStepOn3Ranks) {
  auto rs = ringtest::run_ranks(3, compare_runs, /*limit_s=*/120);
  EXPECT_EQ(ringtest::all_exited_with(rs, 0), "");
}

#endif  // DPTRAIN_HAVE_CUDA

// Host-checked: the test's buckets are what the GPU cases say (uneven pieces on 2 and 3 ranks,
// buckets on both sides of the small-message bound).
TEST(ZeroGpuLayout, BucketsCutTheArenaUnevenly) {
  const std::vector<Bucket> b = test_buckets();
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].end - b[0].begin, 5003);  // 20,012 bytes: above the test's small-message bound
  EXPECT_EQ(b[1].end - b[1].begin, 3796);  // 15,184: above
  EXPECT_EQ(b[2].end - b[2].begin, 1207);  // 4,828: below
  EXPECT_EQ(b[2].begin, 0);
  EXPECT_EQ(b[0].end, kN);
}

}  // namespace
}  // namespace dp
