// Device (CUDA) tensors in the collectives backends (the contract in collectives/communicator.h):
// the staging pool's choice and the host-side rules run everywhere; the GPU tests (RingDeviceGpu:
// ring on 2 and 3 processes sharing GPU 0, every op and ZeRO's in-place block pair; DeviceStagingGpu: the staging pool itself;
// SingleAndNcclDeviceGpu: single and nccl on one GPU) skip without a GPU. Every GPU body runs in
// forked ranks: the test process never initialises CUDA (tests/gpu_test.h, DP_GPU_TEST_IN_CHILD).
// CI runs the ring's and the pool's GPU tests on the CUDA emulator too (test_collectives_emu):
// the bytes, not the stream order (the emulator runs all work at enqueue).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/device_staging.h"
#include "collectives/ring/algorithms.h"
#include "collectives/ring/ring_communicator.h"
#include "tests/collectives/ring_harness.h"
#include "tests/gpu_test.h"

#ifdef DPTRAIN_HAVE_CUDA
#ifndef DP_CUDA_EMU
#include "collectives/nccl/nccl_communicator.h"
#endif
#include "runtime/cuda/buffers.h"
#include "runtime/cuda/stream.h"
#include "runtime/cuda/check.h"
#endif

namespace dp {
namespace {

TEST(DeviceStaging, ChoosesTheSmallestFreeBufferOfTheDeviceThatFits) {
  const std::vector<StagingBufferInfo> b = {
      {1000, 0, false}, {400, 0, false}, {300, 0, true}, {500, 1, false}, {450, 0, false}};
  EXPECT_EQ(choose_staging_buffer(b, 300, 0), 1);   // 400: 300 is busy
  EXPECT_EQ(choose_staging_buffer(b, 420, 0), 4);   // 450
  EXPECT_EQ(choose_staging_buffer(b, 450, 0), 4);   // exactly
  EXPECT_EQ(choose_staging_buffer(b, 451, 0), 0);   // 1000
  EXPECT_EQ(choose_staging_buffer(b, 1001, 0), -1);  // none: allocate
  EXPECT_EQ(choose_staging_buffer(b, 100, 1), 3);   // the other device's own
  EXPECT_EQ(choose_staging_buffer(b, 600, 1), -1);
  EXPECT_EQ(choose_staging_buffer(b, 1, 2), -1);
  EXPECT_EQ(choose_staging_buffer({}, 0, 0), -1);
}

TEST(SingleProcessCommunicator, StreamOrderedAllreduceIsTheIdentityWithoutWaiting) {
  SingleProcessCommunicator c;
  Tensor t = Tensor::zeros({5});
  t.fill_(2.5);
  WorkPtr w = c.allreduce_stream_async(t, ReduceOp::Avg, nullptr);
  EXPECT_TRUE(w->is_completed());
  w->wait();
  EXPECT_EQ(w->description(), "single allreduce #1 (f32, 5 elements, avg)");
  EXPECT_EQ(t.data<float>()[4], 2.5f);
  EXPECT_FALSE(c.device_native());
  c.stream_wait_collectives(nullptr);  // nothing to order: a no-op
}

TEST(SingleProcessCommunicator, StreamOrderedBlockReduceScatterIsTheIdentityWithoutWaiting) {
  SingleProcessCommunicator c;
  Tensor t = Tensor::zeros({7});
  t.fill_(-1.25);
  WorkPtr w = c.reduce_scatter_blocks_stream_async(t, ReduceOp::Avg, nullptr);
  EXPECT_TRUE(w->is_completed());
  w->wait();
  EXPECT_EQ(w->description(), "single reduce_scatter_blocks #1 (f32, 7 elements, avg)");
  EXPECT_EQ(t.data<float>()[6], -1.25f);
}

// The ring's stream-ordered forms are for device tensors: a host tensor is a clear error, each
// naming its collective (rank 0 reports the all-reduce's, rank 1 the block reduce-scatter's).
TEST(RingDevice, StreamOrderedFormsOfAHostTensorAreClearErrors) {
  auto rs = ringtest::run_ranks(
      2,
      [](Bootstrap& bs, ringtest::SharedState* s, int r) {
        auto c = make_ring_communicator(bs, RingOptions{});
        if (c->device_native()) return 2;
        try {
          if (r == 0) c->allreduce_stream_async(Tensor::zeros({3}), ReduceOp::Sum, nullptr);
          else c->reduce_scatter_blocks_stream_async(Tensor::zeros({4}), ReduceOp::Avg, nullptr);
        } catch (const DpError& e) {
          ringtest::report(s, r, e.what());
          return 0;
        }
        return 1;
      },
      /*limit_s=*/30);
  EXPECT_EQ(ringtest::all_exited_with(rs, 0), "");
  EXPECT_NE(rs[0].report.find("ring allreduce_stream_async: takes a device tensor, got f32[3] on cpu"),
            std::string::npos)
      << rs[0].report;
  EXPECT_NE(rs[1].report.find("ring reduce_scatter_blocks_stream_async: takes a device tensor, got f32[4] on cpu"),
            std::string::npos)
      << rs[1].report;
}

#ifdef DPTRAIN_HAVE_CUDA

// A host tensor of n elements of dt: rank r's deterministic input of case `seed`.
Tensor host_input(DType dt, uint64_t seed, int r, int64_t n) {
  Tensor t = Tensor::zeros({n}, dt);
  auto* p = static_cast<unsigned char*>(t.raw());
  for (int64_t i = 0; i < n; ++i) ringtest::input_value(dt, seed, r, i, p + i * dtype_size(dt));
  return t;
}

Tensor to_device(const Tensor& h) {
  Tensor d = Tensor::zeros(h.shape(), h.dtype(), Device::cuda(0));
  d.copy_from(h);  // synchronous
  return d;
}

Tensor to_host(const Tensor& d) {
  Tensor h = Tensor::zeros(d.shape(), d.dtype());
  h.copy_from(d);
  return h;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// Every op of the ring on device tensors equals the same op on host tensors, byte for byte
// (one communicator, the same collectives in the same order on every rank: the same algorithm
// and reduction order), for small (latency algorithms) and large (ring, pipelined) messages.
void ring_device_matches_host(int n) {
  auto rs = ringtest::run_ranks(
      n,
      [](Bootstrap& bs, ringtest::SharedState* s, int r) {
        auto c = make_ring_communicator(bs, RingOptions{});
        const int world = c->size();
        int bad = 0;
        auto expect = [&](bool ok, const std::string& what) {
          if (!ok && bad++ < 5) ringtest::report(s, r, what + " differs; ");
        };
        uint64_t seed = 1;
        for (DType dt : {DType::F32, DType::BF16, DType::F16, DType::F64, DType::I32})
          for (int64_t count : {int64_t{1}, int64_t{1000}, int64_t{300000}}) {
            const std::string what = fmt::format("{} x {}", dtype_name(dt), count);
            for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
              Tensor h = host_input(dt, ++seed, r, count), d = to_device(h);
              c->allreduce(h, op);
              c->allreduce(d, op);
              expect(same_bytes(h, to_host(d)), fmt::format("allreduce {} {}", reduce_op_name(op), what));
              Tensor h2 = host_input(dt, ++seed, r, count), d2 = to_device(h2);
              WorkPtr wh = c->allreduce_async(h2, op), wd = c->allreduce_async(d2, op);
              wh->wait();
              wd->wait();
              expect(same_bytes(h2, to_host(d2)), fmt::format("allreduce_async {} {}", reduce_op_name(op), what));
            }
            {
              const int root = 1 % world;
              Tensor h = host_input(dt, ++seed, r, count), d = to_device(h);
              c->broadcast(h, root);
              c->broadcast(d, root);
              expect(same_bytes(h, to_host(d)), "broadcast " + what);
            }
            {
              Tensor in = host_input(dt, ++seed, r, count), out = Tensor::zeros({count * world}, dt);
              Tensor din = to_device(in), dout = Tensor::zeros({count * world}, dt, Device::cuda(0));
              c->allgather(in, out);
              c->allgather(din, dout);
              expect(same_bytes(out, to_host(dout)), "allgather " + what);
            }
            {
              Tensor in = host_input(dt, ++seed, r, count * world), out = Tensor::zeros({count}, dt);
              Tensor din = to_device(in), dout = Tensor::zeros({count}, dt, Device::cuda(0));
              c->reduce_scatter(in, out, ReduceOp::Avg);
              c->reduce_scatter(din, dout, ReduceOp::Avg);
              expect(same_bytes(out, to_host(dout)), "reduce_scatter " + what);
            }
            {  // ZeRO's in-place pair: block r's bytes after the reduce-scatter, all of them after the gather
              const ring::Block mine = ring::ring_block(count, world, r);
              Tensor h = host_input(dt, ++seed, r, count), d = to_device(h);
              c->reduce_scatter_blocks_async(h, ReduceOp::Avg)->wait();
              c->reduce_scatter_blocks_async(d, ReduceOp::Avg)->wait();
              expect(same_bytes(h.slice_flat(mine.begin, {mine.len}),
                                to_host(d).slice_flat(mine.begin, {mine.len})),
                     "reduce_scatter_blocks " + what);
              Tensor g = host_input(dt, ++seed, r, count), dg = to_device(g);
              c->allgather_blocks_async(g)->wait();
              c->allgather_blocks_async(dg)->wait();
              expect(same_bytes(g, to_host(dg)), "allgather_blocks " + what);
            }
          }
        return bad == 0 ? 0 : 1;
      },
      /*limit_s=*/240);
  EXPECT_EQ(ringtest::all_exited_with(rs, 0), "");
}

DP_GPU_TEST_IN_CHILD(RingDeviceGpu, EveryOpOnDeviceTensorsMatchesTheHostOn2Ranks) {
  ring_device_matches_host(2);
}

DP_GPU_TEST_IN_CHILD(RingDeviceGpu, EveryOpOnDeviceTensorsMatchesTheHostOn3Ranks) {
  ring_device_matches_host(3);
}

// A host callback that sleeps: work queued behind it on a stream has not run when the host goes on.
void CUDART_CB sleep_5ms(void*) { usleep(5000); }

// The stream-ordered form reads the tensor as left by the work already on the stream, without a
// host wait: the data is written on `s` behind a 5 ms sleep when the collective is issued.
DP_GPU_TEST_IN_CHILD(RingDeviceGpu, StreamOrderedAllreduceWaitsForTheStreamNotTheCaller) {
  auto rs = ringtest::run_ranks(
      3,
      [](Bootstrap& bs, ringtest::SharedState* s, int r) {
        auto c = make_ring_communicator(bs, RingOptions{});
        cuda::CudaStream stream(0);
        const int64_t n = 100000;
        int bad = 0;
        for (int round = 0; round < 4; ++round) {
          Tensor src = to_device(host_input(DType::F32, 100 + round, r, n));
          Tensor d = Tensor::zeros({n}, DType::F32, Device::cuda(0));
          Tensor want = host_input(DType::F32, 100 + round, r, n);
          c->allreduce(want, ReduceOp::Sum);
          CHECK_CUDA(cudaLaunchHostFunc(stream.get(), sleep_5ms, nullptr));
          CHECK_CUDA(cudaMemcpyAsync(d.raw(), src.raw(), d.nbytes(), cudaMemcpyDeviceToDevice, stream.get()));
          WorkPtr w = c->allreduce_stream_async(d, ReduceOp::Sum, stream.get());
          w->wait();
          if (!same_bytes(want, to_host(d))) {
            ringtest::report(s, r, fmt::format("round {}: the result differs from the host's; ", round));
            ++bad;
          }
          // ZeRO's form (the Reducer's under train.zero): block r as the host's reduce-scatter leaves it.
          Tensor want_rs = host_input(DType::F32, 200 + round, r, n);
          c->reduce_scatter_blocks_async(want_rs, ReduceOp::Avg)->wait();
          Tensor src_rs = to_device(host_input(DType::F32, 200 + round, r, n));
          CHECK_CUDA(cudaLaunchHostFunc(stream.get(), sleep_5ms, nullptr));
          CHECK_CUDA(cudaMemcpyAsync(d.raw(), src_rs.raw(), d.nbytes(), cudaMemcpyDeviceToDevice, stream.get()));
          c->reduce_scatter_blocks_stream_async(d, ReduceOp::Avg, stream.get())->wait();
          const ring::Block mine = ring::ring_block(n, c->size(), r);
          if (!same_bytes(want_rs.slice_flat(mine.begin, {mine.len}), to_host(d).slice_flat(mine.begin, {mine.len}))) {
            ringtest::report(s, r, fmt::format("round {}: reduce_scatter_blocks' block differs from the host's; ", round));
            ++bad;
          }
        }
        return bad == 0 ? 0 : 1;
      },
      /*limit_s=*/120);
  EXPECT_EQ(ringtest::all_exited_with(rs, 0), "");
}

// The pool: a round trip through a lease; buffers reused once given back, a second one only
// while the first is held.
DP_GPU_TEST_IN_CHILD(DeviceStagingGpu, RoundTripAndReuse) {
  auto rs = ringtest::run_ranks(
      1,
      [](Bootstrap&, ringtest::SharedState* s, int r) {
        DeviceStaging st;
        Tensor h = host_input(DType::F32, 5, 0, 4096), d = to_device(h), back = Tensor::zeros({4096}, DType::F32,
                                                                                               Device::cuda(0));
        {
          auto lease = st.acquire(d.nbytes(), 0);
          lease->copy_in(d, 0, nullptr);
          lease->wait_in();
          if (std::memcmp(lease->host(), h.raw(), h.nbytes()) != 0) ringtest::report(s, r, "copy in differs; ");
          lease->copy_out(0, back);
        }
        if (!same_bytes(h, to_host(back))) ringtest::report(s, r, "copy out differs; ");
        {
          auto a = st.acquire(1000, 0);  // the 16 KiB buffer, free again
          if (st.buffers_allocated() != 1) ringtest::report(s, r, "not reused; ");
          auto b = st.acquire(1000, 0);  // the first is held: a second
          if (st.buffers_allocated() != 2) ringtest::report(s, r, "no second buffer; ");
        }
        auto c = st.acquire(16384, 0);
        if (st.buffers_allocated() != 2) ringtest::report(s, r, "not reused after both were given back; ");
        return 0;
      },
      /*limit_s=*/60);
  EXPECT_EQ(ringtest::all_exited_with(rs, 0), "");
  EXPECT_EQ(rs[0].report, "");
}

// Single and nccl on one GPU: allreduce and broadcast of one rank leave the tensor as it is;
// nccl orders a stream after its collectives without a host wait. (Not on the CUDA emulator,
// which has no NCCL: test_collectives_emu compiles this file without it.)
#ifndef DP_CUDA_EMU
DP_GPU_TEST_IN_CHILD(SingleAndNcclDeviceGpu, OneRankLeavesDeviceTensorsAsTheyAre) {
  auto rs = ringtest::run_ranks(
      1,
      [](Bootstrap& bs, ringtest::SharedState* s, int r) {
        SingleProcessCommunicator single;
        auto nccl = make_nccl_communicator(bs, 30);
        if (!nccl->device_native() || single.device_native()) ringtest::report(s, r, "device_native; ");
        for (Communicator* c : {static_cast<Communicator*>(&single), nccl.get()}) {
          Tensor h = host_input(DType::F32, 9, 0, 777), d = to_device(h);
          c->allreduce(d, ReduceOp::Avg);
          c->broadcast(d, 0);
          cuda::CudaStream stream(0);
          c->allreduce_stream_async(d, ReduceOp::Sum, stream.get())->wait();
          c->stream_wait_collectives(stream.get());
          stream.synchronize();
          if (!same_bytes(h, to_host(d))) ringtest::report(s, r, std::string(c->backend()) + " changed it; ");
        }
        return 0;
      },
      /*limit_s=*/60);
  EXPECT_EQ(ringtest::all_exited_with(rs, 0), "");
  EXPECT_EQ(rs[0].report, "");
}
#endif  // DP_CUDA_EMU

#endif  // DPTRAIN_HAVE_CUDA

}  // namespace
}  // namespace dp
