// The nccl backend and make_communicator. Without a GPU: the GPU-assignment checks (pure
// functions, exact messages), the factory's choices and errors. With GPUs (skipped otherwise):
// every op on device tensors against the host reference on one rank, two ranks on one GPU
// refused before NCCL is called, and with two GPUs ZeRO's block pair and a rank that never joins
// a collective (the other times out and aborts, naming the op and its sequence number).
//
// CUDA is never initialised in the test process before a fork (a forked child cannot use it
// then): GPUs are counted in a child (tests/gpu_test.h, DP_GPU_TEST_IN_CHILD). Suites:
// NcclCommunicatorGpu (one GPU), NcclCommunicator2Gpu (two).
#include <gtest/gtest.h>

#include <regex>

#include "collectives/make_communicator.h"
#include "collectives/nccl/gpu_assignment.h"
#include "collectives/ring/algorithms.h"
#include "runtime/device_memory.h"
#include "tests/collectives/ring_harness.h"
#include "tests/gpu_test.h"
#ifdef DPTRAIN_HAVE_CUDA
#include "collectives/nccl/nccl_communicator.h"
#endif

namespace dp {
namespace {

using nccl::GpuIdentity;

GpuIdentity gpu(const std::string& host, int device, const std::string& uuid, int visible = 1) {
  return GpuIdentity{host, device, visible, uuid, fmt::format("0000:{:02x}:00.0", 0x3b + device)};
}

// ---- pure: the GPU assignment ----

TEST(NcclGpuAssignment, IdentityRoundTripsThroughItsBlob) {
  const GpuIdentity g = gpu("node-1", 3, "GPU-8c6e0b6a-1d2e-3f40-5a6b-7c8d9e0f1a2b", 8);
  const auto back = nccl::parse_gpu_identity(nccl::encode_gpu_identity(g));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->host, "node-1");
  EXPECT_EQ(back->device, 3);
  EXPECT_EQ(back->visible, 8);
  EXPECT_EQ(back->uuid, g.uuid);
  EXPECT_EQ(back->pci_bus_id, "0000:3e:00.0");
  EXPECT_FALSE(nccl::parse_gpu_identity("dpgpu1\tnode\t0\t1\tGPU-x").has_value());       // a field short
  EXPECT_FALSE(nccl::parse_gpu_identity("dpgpu2\tnode\t0\t1\tGPU-x\tpci").has_value());  // another version
  EXPECT_FALSE(nccl::parse_gpu_identity("dpgpu1\tnode\tzero\t1\tGPU-x\tpci").has_value());
}

TEST(NcclGpuAssignment, OneGpuPerRankIsFineAlsoWithTheSameOrdinalOnAnotherHost) {
  EXPECT_EQ(nccl::gpu_assignment_error({gpu("a", 0, "GPU-0", 2), gpu("a", 1, "GPU-1", 2), gpu("b", 0, "GPU-0", 2),
                                        gpu("b", 1, "GPU-1", 2)}),
            "");
  // CUDA_VISIBLE_DEVICES per rank: both see "device 0", but they are different GPUs.
  EXPECT_EQ(nccl::gpu_assignment_error({gpu("a", 0, "GPU-0"), gpu("a", 0, "GPU-1")}), "");
}

TEST(NcclGpuAssignment, TwoRanksOnOneGpuAreNamedWithTheGpuAndWhatToDo) {
  EXPECT_EQ(nccl::gpu_assignment_error({gpu("a", 0, "GPU-0"), gpu("a", 0, "GPU-0")}),
            "nccl backend: ranks 0 and 1 on host a both use GPU 0 (GPU-0, PCI 0000:3b:00.0); NCCL needs one GPU per "
            "rank: start at most 1 rank per node there (it shows 1 GPU), or give each rank its own GPU with "
            "CUDA_VISIBLE_DEVICES");
  // 3 ranks on a node with 2 GPUs (local rank mod 2): ranks 0 and 2 share GPU 0 on host b.
  std::vector<GpuIdentity> ranks = {gpu("b", 0, "GPU-b0", 2), gpu("b", 1, "GPU-b1", 2), gpu("b", 0, "GPU-b0", 2)};
  EXPECT_EQ(nccl::gpu_assignment_error(ranks),
            "nccl backend: ranks 0 and 2 on host b both use GPU 0 (GPU-b0, PCI 0000:3b:00.0); NCCL needs one GPU per "
            "rank: start at most 2 ranks per node there (it shows 2 GPUs), or give each rank its own GPU with "
            "CUDA_VISIBLE_DEVICES");
  ranks.push_back(gpu("b", 0, "GPU-b0", 2));
  EXPECT_NE(nccl::gpu_assignment_error(ranks).find("ranks 0, 2 and 3 on host b all use GPU 0"), std::string::npos);
}

TEST(NcclGpuAssignment, ARankWithoutAGpuIsNamed) {
  GpuIdentity none;
  none.host = "cpu-node";
  EXPECT_EQ(nccl::gpu_assignment_error({gpu("a", 0, "GPU-0"), none}),
            "nccl backend: rank 1 on host cpu-node sees no CUDA device (no GPU, no driver, or CUDA_VISIBLE_DEVICES "
            "hides them all); use dist.backend = \"ring\" without GPUs");
}

// ---- make_communicator ----

class OneRank final : public Bootstrap {
 public:
  const char* kind() const override { return "test-one"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  int node_id() const override { return 0; }
  std::vector<std::string> allgather(const std::string& mine) override { return {mine}; }
};

TEST(MakeCommunicator, UnknownBackendListsTheKnownOnes) {
  try {
    parse_collective_backend("gloo");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "unknown collectives backend \"gloo\" (known: ring, nccl)");
  }
}

TEST(MakeCommunicator, AWorldOfOneIsTheSingleProcessCommunicator) {
  OneRank one;
  EXPECT_EQ(parse_collective_backend("ring"), CollectiveBackend::Ring);
  EXPECT_EQ(parse_collective_backend("nccl"), CollectiveBackend::Nccl);
  auto c = make_communicator(CollectiveBackend::Ring, one, 5);
  EXPECT_STREQ(c->backend(), "single");
  EXPECT_EQ(c->size(), 1);
}

TEST(MakeCommunicator, NcclWithoutCudaOrGpuIsAClearUserError) {
  if (gputest::InChild::gpus() > 0) GTEST_SKIP() << "this machine has a GPU";
  OneRank one;
  try {
    make_communicator(CollectiveBackend::Nccl, one, 5);
    FAIL() << "no error";
  } catch (const UserError& e) {
    const std::string msg = e.what();
#ifdef DPTRAIN_HAVE_CUDA
    EXPECT_TRUE(std::regex_match(msg, std::regex(R"(backend "nccl" needs a GPU and this process sees none \[rank 0/\d+ )"
                                                 R"(on [^\]]+\] \(no GPU, no driver, or CUDA_VISIBLE_DEVICES hides )"
                                                 R"(them all\); use backend "ring")")))
        << msg;
#else
    EXPECT_NE(msg.find("backend \"nccl\": this dptrain was built without CUDA (and so without NCCL)"),
              std::string::npos)
        << msg;
#endif
  }
}

TEST(MakeCommunicator, RingOnTwoRanksAllReduces) {
  auto rs = ringtest::run_ranks(
      2,
      [](Bootstrap& bs, ringtest::SharedState* s, int r) {
        auto c = make_communicator(CollectiveBackend::Ring, bs, 20);
        Tensor t = Tensor::zeros({3});
        t.fill_(r + 1.0);
        c->allreduce(t, ReduceOp::Sum);
        ringtest::report(s, r, fmt::format("{} {} {}", c->backend(), t.data<float>()[0], t.data<float>()[2]));
        return 0;
      },
      /*limit_s=*/30);
  EXPECT_EQ(ringtest::all_exited_with(rs, 0), "");
  EXPECT_EQ(rs[0].report, "ring 3 3");
  EXPECT_EQ(rs[1].report, "ring 3 3");
}

// ---- with GPUs ----
#ifdef DPTRAIN_HAVE_CUDA

// Two ranks that would both drive GPU 0: every rank fails before NCCL is called.
DP_GPU_TEST_IN_CHILD(NcclCommunicatorGpu, TwoRanksOnOneGpuFailBeforeNcclIsCalled) {
  auto rs = ringtest::run_ranks(
      2,
      [](Bootstrap& bs, ringtest::SharedState* s, int r) {
        try {
          make_nccl_communicator(bs, 10, /*device=*/0);
        } catch (const UserError& e) {
          ringtest::report(s, r, e.what());
          return 3;
        }
        return 1;
      },
      /*limit_s=*/60);
  EXPECT_EQ(ringtest::all_exited_with(rs, 3), "");
  for (int r = 0; r < 2; ++r)
    EXPECT_TRUE(std::regex_search(rs[r].report, std::regex(R"(^nccl backend: ranks 0 and 1 on host \S+ both use GPU 0 )"
                                                           R"(\(GPU-[0-9a-f-]{36}, PCI [0-9a-fA-F:.]+\); NCCL needs one )"
                                                           R"(GPU per rank: )")))
        << rs[r].report;
}

// Every op and dtype on one rank's GPU: NCCL's results copied back equal the host reference
// (a world of one: the identity, and allgather / reduce_scatter copy).
DP_GPU_TEST_IN_CHILD(NcclCommunicatorGpu, EveryOpOnOneGpuMatchesTheHost) {
  auto rs = ringtest::run_ranks(
      1,
      [](Bootstrap& bs, ringtest::SharedState* s, int r) {
        auto c = make_nccl_communicator(bs, 30);
        int bad = 0;
        const Device dev = Device::cuda(0);
        for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I32}) {
          const int64_t n = 1023;
          Tensor host = Tensor::zeros({n}, dt);
          for (int64_t i = 0; i < n; ++i)
            ringtest::input_value(dt, 9, r, i, static_cast<char*>(host.raw()) + i * dtype_size(dt));
          for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) {
            Tensor d = Tensor::zeros({n}, dt, dev);
            d.copy_from(host);
            WorkPtr w = c->allreduce_async(d, op);
            w->wait();
            Tensor back = Tensor::zeros({n}, dt);
            back.copy_from(d);
            if (std::memcmp(back.raw(), host.raw(), host.nbytes()) != 0) {
              ringtest::report(s, r, fmt::format("{}: {} differs\n", w->description(), reduce_op_name(op)));
              ++bad;
            }
          }
          Tensor d = Tensor::zeros({n}, dt, dev), out = Tensor::zeros({n}, dt, dev);
          d.copy_from(host);
          c->broadcast(d, 0);
          c->allgather(d, out);
          c->reduce_scatter(out, d, ReduceOp::Sum);
          c->reduce_scatter_blocks_async(d, ReduceOp::Sum)->wait();  // a world of one: the identity
          c->allgather_blocks_async(d)->wait();
          c->barrier();
          Tensor back = Tensor::zeros({n}, dt);
          back.copy_from(d);
          if (std::memcmp(back.raw(), host.raw(), host.nbytes()) != 0) {
            ringtest::report(s, r,
                             fmt::format("{} broadcast/allgather/reduce_scatter(_blocks) differ\n", dtype_name(dt)));
            ++bad;
          }
        }
        // Host tensors: allreduce and broadcast go through a device copy (the trainer's stop flag
        // and evaluation sums); the other ops refuse them with a pointer to the ring backend.
        {
          Tensor h = Tensor::zeros({4}, DType::F64);
          for (int i = 0; i < 4; ++i) h.data<double>()[i] = 1.5 * i - 2;
          const Tensor want = h.clone();
          c->allreduce(h, ReduceOp::Sum);
          c->broadcast(h, 0);
          if (std::memcmp(h.raw(), want.raw(), h.nbytes()) != 0) {
            ringtest::report(s, r, "host allreduce/broadcast through the device changed the values\n");
            ++bad;
          }
        }
        try {
          c->allgather(Tensor::zeros({4}), Tensor::zeros({4}));
          ++bad;
        } catch (const DpError& e) {
          if (std::string(e.what()).find("the nccl backend takes tensors on this rank's GPU (cuda:0)") ==
              std::string::npos) {
            ringtest::report(s, r, e.what());
            ++bad;
          }
        }
        return bad == 0 ? 0 : 1;
      },
      /*limit_s=*/120);
  EXPECT_EQ(ringtest::all_exited_with(rs, 0), "");
}

// ZeRO's pair on two GPUs, for equal blocks (one reduce-scatter / all-gather) and unequal ones
// (a group of reduces / broadcasts, one block empty at n = 1): after reduce_scatter_blocks a
// rank's block holds the allreduce's bits (two addends: any order gives the same sum), and after
// allgather_blocks every block holds its owner's values.
DP_GPUS_TEST_IN_CHILD(NcclCommunicator2Gpu, BlocksOpsGiveTheAllreducesBlockAndTheOwnersValues, 2) {
  auto rs = ringtest::run_ranks(
      2,
      [](Bootstrap& bs, ringtest::SharedState* s, int r) {
        auto c = make_nccl_communicator(bs, 30, r);
        const Device dev = Device::cuda(r);
        int bad = 0;
        for (DType dt : {DType::F32, DType::BF16, DType::I32})
          for (int64_t n : {int64_t{1024}, int64_t{1023}, int64_t{1}}) {
            const size_t esz = dtype_size(dt);
            Tensor host = Tensor::zeros({n}, dt);
            for (int64_t i = 0; i < n; ++i)
              ringtest::input_value(dt, 7, r, i, static_cast<char*>(host.raw()) + i * esz);
            Tensor a = Tensor::zeros({n}, dt, dev), b = Tensor::zeros({n}, dt, dev);
            a.copy_from(host);
            b.copy_from(host);
            c->allreduce(a, ReduceOp::Sum);
            c->reduce_scatter_blocks_async(b, ReduceOp::Sum)->wait();
            Tensor ha = Tensor::zeros({n}, dt), hb = Tensor::zeros({n}, dt);
            ha.copy_from(a);
            hb.copy_from(b);
            const ring::Block mine = ring::ring_block(n, 2, r);
            const size_t at = static_cast<size_t>(mine.begin) * esz;
            if (std::memcmp(static_cast<char*>(ha.raw()) + at, static_cast<char*>(hb.raw()) + at,
                            static_cast<size_t>(mine.len) * esz) != 0) {
              ringtest::report(
                  s, r, fmt::format("{} n={}: block {} differs from the allreduce's\n", dtype_name(dt), n, r));
              ++bad;
            }
            // allgather_blocks: block j of rank j's input (seed 5), the rest of the tensor 0.
            Tensor mine_only = Tensor::zeros({n}, dt), want = Tensor::zeros({n}, dt);
            for (int owner = 0; owner < 2; ++owner) {
              const ring::Block blk = ring::ring_block(n, 2, owner);
              for (int64_t i = blk.begin; i < blk.begin + blk.len; ++i) {
                ringtest::input_value(dt, 5, owner, i, static_cast<char*>(want.raw()) + i * esz);
                if (owner == r) ringtest::input_value(dt, 5, owner, i, static_cast<char*>(mine_only.raw()) + i * esz);
              }
            }
            Tensor g = Tensor::zeros({n}, dt, dev);
            g.copy_from(mine_only);
            c->allgather_blocks_async(g)->wait();
            Tensor hg = Tensor::zeros({n}, dt);
            hg.copy_from(g);
            if (std::memcmp(hg.raw(), want.raw(), want.nbytes()) != 0) {
              ringtest::report(s, r, fmt::format("{} n={}: allgather_blocks differs from the owners' blocks\n",
                                                 dtype_name(dt), n));
              ++bad;
            }
          }
        return bad == 0 ? 0 : 1;
      },
      /*limit_s=*/120);
  EXPECT_EQ(ringtest::all_exited_with(rs, 0), "") << rs[0].report << rs[1].report;
}

// Two GPUs: rank 1 never issues #2; rank 0's allreduce #2 times out, aborts the communicator
// and says which collective; a later collective fails at once.
DP_GPUS_TEST_IN_CHILD(NcclCommunicator2Gpu, ARankThatNeverJoinsTimesOutAndAborts, 2) {
  auto rs = ringtest::run_ranks(
      2,
      [](Bootstrap& bs, ringtest::SharedState* s, int r) {
        auto c = make_nccl_communicator(bs, 2.0, r);
        Tensor t = Tensor::zeros({10}, DType::F32, Device::cuda(r));
        c->allreduce(t, ReduceOp::Sum);
        if (r == 1) {
          std::this_thread::sleep_for(std::chrono::seconds(6));
          c->abort("test over");
          return 3;
        }
        try {
          c->allreduce(t, ReduceOp::Sum);
        } catch (const DpError& e) {
          ringtest::report(s, r, std::string(e.what()) + "\n");
        }
        try {
          c->barrier();
        } catch (const DpError& e) {
          ringtest::report(s, r, e.what());
          return 3;
        }
        return 1;
      },
      /*limit_s=*/60);
  EXPECT_EQ(ringtest::all_exited_with(rs, 3), "");
  EXPECT_TRUE(std::regex_search(rs[0].report,
                                std::regex(R"(^nccl allreduce #2 \(f32, 10 elements, sum\) \[rank 0/2 on [^\]]+\] at )"
                                           R"(\S+nccl_communicator.cpp:\d+: not completed after 2 s \(timeout)")))
      << rs[0].report;
  EXPECT_NE(rs[0].report.find("the NCCL communicator was aborted"), std::string::npos) << rs[0].report;
  EXPECT_NE(rs[0].report.find("nccl barrier #3 [rank 0/2 on "), std::string::npos) << rs[0].report;
  EXPECT_NE(rs[0].report.find("not run: the communicator is broken since an earlier error"), std::string::npos)
      << rs[0].report;
}

#endif  // DPTRAIN_HAVE_CUDA

}  // namespace
}  // namespace dp
