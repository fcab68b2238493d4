// ZeRO's save (launch/train_session.cpp save_checkpoint_streamed): ZeroShard::stream_state hands
// the whole optimizer state to the writer a bucket at a time, and CheckpointStream writes it as it
// arrives. Checked here on 2 and 3 forked ranks over the ring, uneven buckets whose pieces cut
// parameters:
//   - rank 0's streamed file is byte for byte write_checkpoint's file of the whole state (header,
//     CRCs and all), and so is every rank's streamed replica;
//   - the save's transient host memory (the memory account's peak over what was live) is one
//     bucket-sized scratch tensor on every rank, where the whole-state route holds the whole state;
//   - a stream missing a bucket is refused at commit, and leaves no file and no temporary file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "base/rng.h"
#include "collectives/reducer/buckets.h"
#include "collectives/reducer/zero_shard.h"
#include "collectives/ring/ring_communicator.h"
#include "models/build.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/log.h"
#include "runtime/memory_account.h"
#include "tests/bytes.h"
#include "tests/collectives/reducer/take_pieces.h"
#include "tests/collectives/ring_harness.h"

namespace dp {
namespace {

namespace fs = std::filesystem;

std::unique_ptr<Graph> mlp() {
  ModelConfig mc;
  mc.preset = PresetKind::Mlp;
  mc.hidden = {96, 40};
  return models::build_model(mc, {1, 8, 8}, 5);
}

// Buckets of two parameters each (closed at 400, then 3000 elements): pieces cut parameters.
std::vector<Bucket> buckets_of(const Graph& g) {
  std::vector<int64_t> numel;
  for (const auto& s : g.params().slots()) numel.push_back(s.numel);
  return assign_buckets(numel, 400, 3000);
}

// The same whole AdamW state on every rank: three steps of the same gradients.
std::unique_ptr<optim::Optimizer> whole_state(Graph& g) {
  auto opt = optim::make_adamw(g.params().numel(), {});
  Rng rng(11, 2);
  for (int s = 0; s < 3; ++s) {
    float* gr = g.grads().flat().data<float>();
    for (int64_t i = 0; i < g.grads().numel(); ++i) gr[i] = static_cast<float>(rng.normal());
    opt->step(g.params().flat(), g.grads().flat(), 0.01);
  }
  return opt;
}

CheckpointMeta meta_of(const optim::Optimizer& opt) {
  CheckpointMeta m;
  m.step = 3, m.batch_size = 8, m.dataset_size = 64, m.world_size = 2;
  m.optimizer = opt.name(), m.optimizer_steps = opt.steps();
  return m;
}

std::string dir_for(const char* what) {
  return (fs::temp_directory_path() / fmt::format("dptrain_zero_save_{}_{}", what, ::getpid())).string();
}

int run_rank(Bootstrap& bs, ringtest::SharedState* s, int r, const std::string& dir) {
  const auto fail = [&](const std::string& why) {
    ringtest::report(s, r, why + "\n");
    return 1;
  };
  log::configure("off");
  RingOptions ro;
  ro.timeout_s = 30;
  auto comm = make_ring_communicator(bs, ro);
  auto g = mlp();
  auto whole = whole_state(*g);
  const std::vector<Bucket> buckets = buckets_of(*g);
  ZeroShard zero(*comm, buckets, g->params().numel());
  auto shard = optim::make_adamw(zero.layout().numel, {});
  testutil::take_pieces(zero, *whole, *shard);
  const CheckpointMeta m = meta_of(*shard);
  const std::string want = fmt::format("{}/want-{}.safetensors", dir, r);
  const std::string got = fmt::format("{}/got-{}.safetensors", dir, r);
  write_checkpoint(want, *g, *whole, m);

  int64_t widest = 0;
  for (const Bucket& b : buckets) widest = std::max(widest, b.end - b.begin);
  const size_t scratch = static_cast<size_t>(widest) * sizeof(float);
  // Streamed, as save_checkpoint_streamed writes: every rank here (the replicas' case).
  const size_t streamed = test::transient_host_bytes([&] {
    CheckpointStream out(got, checkpoint_layout(*g, state_slots(*shard)), m);
    out.append_model();
    zero.stream_state(*shard, [&](int k, int64_t begin, const float* data, int64_t len) {
      out.append_state(k, begin, data, len);
    });
    out.commit();
  });
  // A rank that writes nothing takes part through the scratch only.
  const size_t silent = test::transient_host_bytes([&] { zero.stream_state(*shard, {}); });
  // The route before: the whole state assembled in a whole optimizer from the same stream, then written.
  const size_t assembled = test::transient_host_bytes([&] {
    auto w = optim::make_adamw(g->params().numel(), {});
    const auto dst = w->state();
    zero.stream_state(*shard, [&](int k, int64_t begin, const float* data, int64_t len) {
      std::memcpy(dst[static_cast<size_t>(k)].second.data<float>() + begin, data, static_cast<size_t>(len) * 4);
    });
    w->restore_steps(shard->steps());
    write_checkpoint(fmt::format("{}/assembled-{}.safetensors", dir, r), *g, *w, m);
  });
  const std::string want_bytes = test::file_bytes(want);
  if (want_bytes.empty()) return fail("the oracle file is empty");
  if (test::file_bytes(got) != want_bytes)
    return fail("the streamed file differs from write_checkpoint's of the whole state");
  if (test::file_bytes(fmt::format("{}/assembled-{}.safetensors", dir, r)) != want_bytes)
    return fail("the assembled state's file differs from the whole state's");
  const size_t whole_bytes = 2 * static_cast<size_t>(g->params().numel()) * sizeof(float);
  if (streamed > scratch || silent > scratch)
    return fail(fmt::format("the streamed save held {} B, a silent rank {} B: more than one bucket's {} B", streamed,
                            silent, scratch));
  if (assembled < whole_bytes)
    return fail(fmt::format("the assembled route held {} B, less than the whole state's {} B", assembled, whole_bytes));
  if (r == 0)
    ringtest::report(s, r, fmt::format("scratch {} B, whole state {} B: streamed {} B, silent {} B, assembled {} B",
                                       scratch, whole_bytes, streamed, silent, assembled));
  return 0;
}

TEST(ZeroCheckpointSave, StreamedFileIsTheWholeStatesBytesAndHoldsOneBucket) {
  for (int n : {2, 3}) {
    const std::string dir = dir_for(std::to_string(n).c_str());
    fs::create_directories(dir);
    const auto results = ringtest::run_ranks(
        n, [&](Bootstrap& bs, ringtest::SharedState* s, int r) { return run_rank(bs, s, r, dir); }, 90);
    EXPECT_EQ(ringtest::all_exited_with(results, 0), "") << n << " ranks";
    std::printf("%d ranks: %s\n", n, results[0].report.c_str());
    fs::remove_all(dir);
  }
}

TEST(ZeroCheckpointSave, AStreamMissingABucketIsRefusedAndLeavesNoFile) {
  log::configure("off");
  const std::string dir = dir_for("missing");
  fs::create_directories(dir);
  const std::string path = dir + "/step-3.safetensors";
  auto g = mlp();
  auto whole = whole_state(*g);
  const std::vector<Bucket> buckets = buckets_of(*g);
  {
    CheckpointStream out(path, checkpoint_layout(*g, state_slots(*whole)), meta_of(*whole));
    out.append_model();
    const auto state = whole->state();
    for (int k = 0; k < 2; ++k)
      for (size_t b = 0; b + 1 < buckets.size(); ++b)  // the last bucket never arrives
        out.append_state(k, buckets[b].begin, state[static_cast<size_t>(k)].second.data<float>() + buckets[b].begin,
                         buckets[b].end - buckets[b].begin);
    try {
      out.commit();
      ADD_FAILURE() << "commit accepted a stream without its last bucket";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("of its"), std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dp
