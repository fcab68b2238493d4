// Optimizer::step_pieces (ZeRO's update of a rank's pieces of the arena): for AdamW and SGD with
// momentum, with weight decay skipping some spans, updating the pieces of every "rank" over
// several steps gives each element exactly the bits of step() over the whole arena.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "runtime/optim/optimizer.h"

namespace dp::optim {
namespace {

constexpr int64_t kN = 103;

Tensor filled(float scale, int salt) {
  Tensor t = Tensor::zeros({kN}, DType::F32);
  for (int64_t i = 0; i < kN; ++i)
    t.data<float>()[i] = scale * static_cast<float>((i * 37 + salt * 11) % 29 - 14) / 7.0f;
  return t;
}

// Two "ranks" owning interleaved pieces: rank 0 [0, 20) and [50, 77), rank 1 [20, 50) and [77, 103);
// each rank's state lies piece after piece. Decay skips arena [10, 30) and [90, 95).
struct Rank {
  std::vector<ArenaPiece> pieces;
  int64_t numel;
  std::vector<std::pair<int64_t, int64_t>> skips;  // in state coordinates
};
const Rank kRanks[2] = {{{{0, 20, 0}, {50, 27, 20}}, 47, {{10, 20}}},
                        {{{20, 30, 0}, {77, 26, 30}}, 56, {{0, 10}, {43, 48}}}};

void pieces_equal_whole(const std::function<std::unique_ptr<Optimizer>(int64_t)>& make) {
  Tensor whole_p = filled(1.0f, 1), pieces_p = filled(1.0f, 1);
  auto whole = make(kN);
  whole->skip_decay({{10, 30}, {90, 95}});
  std::unique_ptr<Optimizer> shard[2] = {make(kRanks[0].numel), make(kRanks[1].numel)};
  for (int r = 0; r < 2; ++r) shard[r]->skip_decay(kRanks[r].skips);
  for (int step = 0; step < 4; ++step) {
    const Tensor g = filled(0.1f + 0.05f * static_cast<float>(step), step + 2);
    const double lr = 0.01 / (1 + step);
    whole->step(whole_p, g, lr);
    for (int r = 0; r < 2; ++r) shard[r]->step_pieces(pieces_p, g, kRanks[r].pieces, lr);
  }
  EXPECT_EQ(std::memcmp(whole_p.raw(), pieces_p.raw(), kN * sizeof(float)), 0);
  EXPECT_EQ(shard[0]->steps(), 4);
  // The state too: each rank's pieces of it are the whole's.
  const auto ws = whole->state();
  for (int r = 0; r < 2; ++r) {
    const auto ss = shard[r]->state();
    ASSERT_EQ(ss.size(), ws.size());
    for (size_t k = 0; k < ws.size(); ++k)
      for (const ArenaPiece& pc : kRanks[r].pieces)
        EXPECT_EQ(std::memcmp(ws[k].second.data<float>() + pc.arena_begin, ss[k].second.data<float>() + pc.state_begin,
                              pc.len * sizeof(float)),
                  0)
            << ws[k].first << " of rank " << r;
  }
}

TEST(StepPieces, AdamWPiecesGiveTheWholeArenasBits) {
  pieces_equal_whole([](int64_t n) { return make_adamw(n, AdamWOptions{0.9, 0.99, 1e-8, 0.1}); });
}

TEST(StepPieces, SgdWithMomentumPiecesGiveTheWholeArenasBits) {
  SgdOptions o;
  o.momentum = 0.9, o.weight_decay = 0.01, o.nesterov = true;
  pieces_equal_whole([o](int64_t n) { return make_sgd(n, o); });
}

TEST(StepPieces, APieceOutsideTheStateIsAnError) {
  auto opt = make_adamw(10, AdamWOptions{});
  const Tensor p = filled(1.0f, 0), g = filled(1.0f, 1);
  EXPECT_THROW(opt->step_pieces(p, g, {{0, 11, 0}}, 0.1), DpError);
  EXPECT_THROW(opt->step_pieces(p, g, {{kN - 5, 10, 0}}, 0.1), DpError);
}

}  // namespace
}  // namespace dp::optim
