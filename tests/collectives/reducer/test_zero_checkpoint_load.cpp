// ZeRO's resume (launch/weight_update.cpp ShardedUpdate::resume): load_checkpoint with a rank's
// pieces (runtime/checkpoint/checkpoint.h) streams the file's optimizer state straight into the
// shard optimizer. Checked here, for every rank of 2- and 3-rank layouts of uneven buckets
// (ring blocks one element apart, pieces that cut parameters):
//   - the shard state and step count are bitwise what take_pieces (take_pieces.h) cuts from the
//     whole load, and the model's state is the whole load's;
//   - the load's transient host memory (the memory account's peak over what was live) is at most
//     the file's largest tensor, where the whole-optimizer route holds at least the whole state.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/rng.h"
#include "collectives/reducer/buckets.h"
#include "collectives/reducer/zero_shard.h"
#include "models/build.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/log.h"
#include "runtime/memory_account.h"
#include "tests/bytes.h"
#include "tests/collectives/reducer/take_pieces.h"

namespace dp {
namespace {

namespace fs = std::filesystem;

// A rank and world for ZeroShard's layout; the load uses no collective.
class LayoutOnly final : public Communicator {
 public:
  LayoutOnly(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "layout-only"; }
  WorkPtr allreduce_async(const Tensor&, ReduceOp) override { return none(); }
  WorkPtr broadcast_async(const Tensor&, int) override { return none(); }
  WorkPtr allgather_async(const Tensor&, const Tensor&) override { return none(); }
  WorkPtr reduce_scatter_async(const Tensor&, const Tensor&, ReduceOp) override { return none(); }
  WorkPtr barrier_async() override { return none(); }
  void abort(const std::string&) override {}

 private:
  [[noreturn]] static WorkPtr none() { fail_check("collective", __FILE__, __LINE__, "LayoutOnly has no collectives"); }
  int rank_, size_;
};

std::unique_ptr<Graph> mlp(uint64_t seed) {
  ModelConfig mc;
  mc.preset = PresetKind::Mlp;
  mc.hidden = {96, 40};
  return models::build_model(mc, {1, 8, 8}, seed);
}

// Buckets of two parameters each (closed at 400, then 3000 elements): pieces cut parameters.
std::vector<Bucket> buckets_of(const Graph& g) {
  std::vector<int64_t> numel;
  for (const auto& s : g.params().slots()) numel.push_back(s.numel);
  return assign_buckets(numel, 400, 3000);
}

std::string state_bytes(const optim::Optimizer& opt) {
  std::string s;
  for (const auto& [n, t] : opt.state()) s += n + "=" + test::tensor_bytes(t) + ";";
  return s + "steps=" + std::to_string(opt.steps());
}
std::string model_bytes(const Graph& g) {
  std::string s;
  for (const auto& nt : g.state()) s += nt.name + "=" + test::tensor_bytes(nt.tensor) + ";";
  return s;
}

class ZeroCheckpointLoad : public ::testing::Test {
 protected:
  void SetUp() override {
    log::configure("off");
    dir_ = (fs::temp_directory_path() / ("dptrain_zero_load_" + std::to_string(::getpid()))).string();
    fs::create_directories(dir_);
    path_ = dir_ + "/step-3.safetensors";
    auto g = mlp(1);
    auto opt = optim::make_adamw(g->params().numel(), {});
    Rng rng(7, 3);
    for (int s = 0; s < 3; ++s) {  // distinctive moments
      float* gr = g->grads().flat().data<float>();
      for (int64_t i = 0; i < g->grads().numel(); ++i) gr[i] = static_cast<float>(rng.normal());
      opt->step(g->params().flat(), g->grads().flat(), 0.01);
    }
    CheckpointMeta m;
    m.step = 3, m.batch_size = 8, m.dataset_size = 64;
    m.optimizer = opt->name(), m.optimizer_steps = opt->steps();
    write_checkpoint(path_, *g, *opt, m);
    buckets_ = buckets_of(*g);
    numel_ = g->params().numel();
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string dir_, path_;
  std::vector<Bucket> buckets_;
  int64_t numel_ = 0;
};

TEST(StateCopies, IntersectsAParameterWithEachPiece) {
  // The parameter at [10, 20) meets piece [0, 12) -> state 0 and piece [15, 115) -> state 12.
  const auto c = state_copies(10, 10, {{0, 12, 0}, {15, 100, 12}, {30, 5, 112}});
  ASSERT_EQ(c.size(), 2u);
  const auto triple = [](const StateCopy& x) { return std::vector<int64_t>{x.tensor_begin, x.state_begin, x.len}; };
  EXPECT_EQ(triple(c[0]), (std::vector<int64_t>{0, 10, 2}));
  EXPECT_EQ(triple(c[1]), (std::vector<int64_t>{5, 12, 5}));
  EXPECT_TRUE(state_copies(0, 4, {{4, 3, 0}}).empty());
}

TEST_F(ZeroCheckpointLoad, StreamedPiecesAreTakePiecesOfTheWholeLoadBitwise) {
  ASSERT_GE(buckets_.size(), 3u);
  auto whole_g = mlp(2);
  auto whole = optim::make_adamw(numel_, {});
  load_checkpoint(path_, *whole_g, *whole);
  for (int world : {2, 3}) {
    std::vector<int64_t> lens;
    for (int r = 0; r < world; ++r) {
      LayoutOnly comm(r, world);
      ZeroShard zero(comm, buckets_, numel_);
      for (const auto& pc : zero.pieces()) lens.push_back(pc.len);
      auto oracle = optim::make_adamw(zero.layout().numel, {});
      testutil::take_pieces(zero, *whole, *oracle);
      auto g = mlp(3);
      auto mine = optim::make_adamw(zero.layout().numel, {});
      load_checkpoint(path_, *g, *mine, zero.pieces());
      EXPECT_EQ(mine->steps(), 3) << world << " ranks, rank " << r;
      EXPECT_TRUE(state_bytes(*mine) == state_bytes(*oracle)) << world << " ranks, rank " << r;
      EXPECT_TRUE(model_bytes(*g) == model_bytes(*whole_g)) << world << " ranks, rank " << r;
    }
    // Uneven: some pieces one element longer than others.
    EXPECT_NE(*std::min_element(lens.begin(), lens.end()), *std::max_element(lens.begin(), lens.end())) << world;
  }
}

TEST_F(ZeroCheckpointLoad, ShardedLoadHoldsOneTensorNotTheWholeState) {
  size_t largest = 0;
  const SafetensorsFile f = SafetensorsFile::open(path_);
  for (const auto& n : f.names()) largest = std::max(largest, f.info(n).end - f.info(n).begin);
  const size_t whole_state = 2 * static_cast<size_t>(numel_) * sizeof(float);  // exp_avg, exp_avg_sq
  LayoutOnly comm(1, 3);
  ZeroShard zero(comm, buckets_, numel_);
  auto g = mlp(3);
  auto mine = optim::make_adamw(zero.layout().numel, {});
  const size_t streamed = test::transient_host_bytes([&] { load_checkpoint(path_, *g, *mine, zero.pieces()); });
  // The route before: a whole optimizer loaded, then this rank's pieces taken from it.
  auto oracle = optim::make_adamw(zero.layout().numel, {});
  const size_t whole_route = test::transient_host_bytes([&] {
    auto whole = optim::make_adamw(numel_, {});
    load_checkpoint(path_, *g, *whole);
    testutil::take_pieces(zero, *whole, *oracle);
  });
  RecordProperty("largest_tensor_bytes", std::to_string(largest));
  RecordProperty("streamed_bytes", std::to_string(streamed));
  RecordProperty("whole_route_bytes", std::to_string(whole_route));
  std::printf("largest tensor %zu B, whole state %zu B: sharded load %zu B, whole-optimizer route %zu B\n", largest,
              whole_state, streamed, whole_route);
  EXPECT_GT(largest, 0u);
  EXPECT_LE(streamed, largest);
  EXPECT_GE(whole_route, whole_state);
  EXPECT_TRUE(state_bytes(*mine) == state_bytes(*oracle));
}

}  // namespace
}  // namespace dp
