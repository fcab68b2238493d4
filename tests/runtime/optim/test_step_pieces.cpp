// Optimizer::step_pieces (ZeRO's update of a rank's pieces of the arena): for AdamW and SGD with
// momentum, with weight-decay spans that cut across pieces, updating the pieces of two "ranks"
// over several steps gives every parameter and state element exactly the bits of step() over the
// whole arena, on the CPU (StepPieces) and on a GPU (StepPiecesGpu: one kernel per piece, the
// skip bounds copied to the device; on the CUDA emulator in CI, label emu, and on a lent GPU).
// With a 16-bit compute copy of the arena (mixed precision on a GPU) the pieces write their elements
// of it. Pieces outside the arena or the state, arenas on another device and copies that do not fit
// are refused.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "runtime/device_memory.h"
#include "runtime/optim/optimizer.h"
#include "tests/gpu_test.h"

#ifdef DPTRAIN_HAVE_CUDA
#include "runtime/cuda/stream.h"
#endif

namespace dp::optim {
namespace {

constexpr int64_t kN = 1037;  // odd: on a GPU the pieces start at every alignment the vector pass handles

Tensor filled(float scale, int salt) {
  Tensor t = Tensor::zeros({kN}, DType::F32);
  for (int64_t i = 0; i < kN; ++i)
    t.data<float>()[i] = scale * static_cast<float>((i * 37 + salt * 11) % 29 - 14) / 7.0f;
  return t;
}

Tensor to(const Tensor& t, Device d) {
  Tensor out = Tensor::zeros(t.shape(), t.dtype(), d);
  out.copy_from(t);
  return out;
}

// Two "ranks" owning interleaved pieces: rank 0 [0, 301) and [600, 777), rank 1 [301, 600) and
// [777, 1037); each rank's state lies piece after piece. Decay skips arena [100, 350) (from rank
// 0's first piece into rank 1's) and [900, 905).
struct Rank {
  std::vector<ArenaPiece> pieces;
  int64_t numel;
  std::vector<std::pair<int64_t, int64_t>> skips;  // in state coordinates
};
const Rank kRanks[2] = {{{{0, 301, 0}, {600, 177, 301}}, 478, {{100, 301}}},
                        {{{301, 299, 0}, {777, 260, 299}}, 559, {{0, 49}, {422, 427}}}};

// place(optimizer): on the CPU nothing; on a GPU place() on its stream. sync: waits for it.
void pieces_equal_whole(const std::function<std::unique_ptr<Optimizer>(int64_t)>& make, Device dev,
                        const std::function<void(Optimizer&)>& place, const std::function<void()>& sync) {
  Tensor whole_p = to(filled(1.0f, 1), dev), pieces_p = to(filled(1.0f, 1), dev);
  auto whole = make(kN);
  whole->skip_decay({{100, 350}, {900, 905}});
  place(*whole);
  std::unique_ptr<Optimizer> shard[2] = {make(kRanks[0].numel), make(kRanks[1].numel)};
  for (int r = 0; r < 2; ++r) {
    shard[r]->skip_decay(kRanks[r].skips);
    place(*shard[r]);
  }
  for (int step = 0; step < 4; ++step) {
    const Tensor g = to(filled(0.1f + 0.05f * static_cast<float>(step), step + 2), dev);
    const double lr = 0.01 / (1 + step);
    whole->step(whole_p, g, lr);
    for (int r = 0; r < 2; ++r) shard[r]->step_pieces(pieces_p, g, kRanks[r].pieces, lr);
    sync();
  }
  const Tensor want = to(whole_p, Device::cpu()), got = to(pieces_p, Device::cpu());
  int64_t differ = 0;
  for (int64_t i = 0; i < kN; ++i)
    differ += std::memcmp(want.data<float>() + i, got.data<float>() + i, sizeof(float)) != 0;
  EXPECT_EQ(differ, 0) << "parameters differing from the whole arena's step";
  EXPECT_EQ(shard[0]->steps(), 4);
  // The state too: each rank's pieces of it are the whole's.
  const auto ws = whole->state();
  for (int r = 0; r < 2; ++r) {
    const auto ss = shard[r]->state();
    ASSERT_EQ(ss.size(), ws.size());
    for (size_t k = 0; k < ws.size(); ++k) {
      const Tensor w = to(ws[k].second, Device::cpu()), s = to(ss[k].second, Device::cpu());
      for (const ArenaPiece& pc : kRanks[r].pieces)
        EXPECT_EQ(std::memcmp(w.data<float>() + pc.arena_begin, s.data<float>() + pc.state_begin,
                              static_cast<size_t>(pc.len) * sizeof(float)),
                  0)
            << ws[k].first << " of rank " << r << ", piece at " << pc.arena_begin;
    }
  }
}

std::unique_ptr<Optimizer> adamw(int64_t n) { return make_adamw(n, AdamWOptions{0.9, 0.99, 1e-8, 0.1}); }

std::unique_ptr<Optimizer> sgd(int64_t n) {
  SgdOptions o;
  o.momentum = 0.9, o.weight_decay = 0.01, o.nesterov = true;
  return make_sgd(n, o);
}

void on_cpu(Optimizer&) {}
void no_wait() {}

TEST(StepPieces, AdamWPiecesGiveTheWholeArenasBits) { pieces_equal_whole(adamw, Device::cpu(), on_cpu, no_wait); }

TEST(StepPieces, SgdWithMomentumPiecesGiveTheWholeArenasBits) {
  pieces_equal_whole(sgd, Device::cpu(), on_cpu, no_wait);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const DpError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(StepPieces, APieceOutsideTheStateOrTheArenaIsAnError) {
  auto opt = make_adamw(10, AdamWOptions{});
  const Tensor p = filled(1.0f, 0), g = filled(1.0f, 1);
  EXPECT_NE(error_of([&] { opt->step_pieces(p, g, {{0, 11, 0}}, 0.1); })
                .find("adamw optimizer: piece (arena 0, 11 elements, state 0) is outside the arena of 1037 or the "
                      "state of 10"),
            std::string::npos);
  EXPECT_NE(error_of([&] { opt->step_pieces(p, g, {{kN - 5, 10, 0}}, 0.1); }).find("is outside the arena of 1037"),
            std::string::npos);
  EXPECT_EQ(opt->steps(), 0);
}

#ifdef DPTRAIN_HAVE_CUDA
DP_GPU_TEST(StepPiecesGpu, AdamWPiecesGiveTheWholeArenasBits) {
  cuda::CudaStream stream(0);
  pieces_equal_whole(
      adamw, Device::cuda(0), [&](Optimizer& o) { o.place(Device::cuda(0), stream.get()); },
      [&] { stream.synchronize(); });
}

DP_GPU_TEST(StepPiecesGpu, SgdWithMomentumPiecesGiveTheWholeArenasBits) {
  cuda::CudaStream stream(0);
  pieces_equal_whole(
      sgd, Device::cuda(0), [&](Optimizer& o) { o.place(Device::cuda(0), stream.get()); },
      [&] { stream.synchronize(); });
}

DP_GPU_TEST(StepPiecesGpu, HostArenasAndAComputeCopyAreRefused) {
  cuda::CudaStream stream(0);
  const Device dev = Device::cuda(0);
  auto opt = make_adamw(10, AdamWOptions{});
  opt->place(dev, stream.get());
  const Tensor p = filled(1.0f, 0), g = filled(1.0f, 1);
  EXPECT_NE(error_of([&] { opt->step_pieces(p, g, {{0, 10, 0}}, 0.1); })
                .find("adamw optimizer placed on cuda:0: step_pieces wants the flat f32 parameter and gradient arenas "
                      "there, got "),
            std::string::npos);
  const Tensor dp = to(p, dev), dg = to(g, dev);
  EXPECT_NE(error_of([&] { opt->step_pieces(dp, dg, {{0, 10, 0}}, 0.1, Tensor::zeros({kN - 1}, DType::BF16, dev)); })
                .find("adamw optimizer on cuda:0: step_pieces was given the compute copy "),
            std::string::npos);
  EXPECT_NE(error_of([&] { opt->step_pieces(dp, dg, {{0, 10, 0}}, 0.1, Tensor::zeros({kN}, DType::F32, dev)); })
                .find("want a flat bf16 or f16 tensor of the arena's 1037 elements on this optimizer's GPU"),
            std::string::npos);
  opt->write_compute_copy(Tensor::zeros({10}, DType::BF16, dev));
  EXPECT_NE(error_of([&] { opt->step_pieces(dp, dg, {{0, 10, 0}}, 0.1); })
                .find("step_pieces (train.zero > 0) writes the compute copy given to it, not write_compute_copy's"),
            std::string::npos);
  EXPECT_EQ(opt->steps(), 0);
}

// Mixed precision: the pieces' elements of the arena's 16-bit copy are the bits the whole arena's
// step writes into its compute copy; before the other rank's pieces step, its elements are untouched.
DP_GPU_TEST(StepPiecesGpu, PiecesWriteTheirElementsOfTheComputeCopy) {
  cuda::CudaStream stream(0);
  const Device dev = Device::cuda(0);
  for (DType dt : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor whole_p = to(filled(1.0f, 1), dev), pieces_p = to(filled(1.0f, 1), dev);
    Tensor whole_c = Tensor::zeros({kN}, dt, dev), pieces_c = Tensor::zeros({kN}, dt, dev);
    auto whole = adamw(kN);
    whole->place(dev, stream.get());
    whole->write_compute_copy(whole_c);
    std::unique_ptr<Optimizer> shard[2] = {adamw(kRanks[0].numel), adamw(kRanks[1].numel)};
    for (auto& s : shard) s->place(dev, stream.get());
    const Tensor g = to(filled(0.2f, 3), dev);
    whole->step(whole_p, g, 0.01);
    shard[0]->step_pieces(pieces_p, g, kRanks[0].pieces, 0.01, pieces_c);
    stream.synchronize();
    const Tensor half = to(pieces_c, Device::cpu());
    int64_t written_outside = 0;
    for (const ArenaPiece& pc : kRanks[1].pieces)
      for (int64_t i = pc.arena_begin; i < pc.arena_begin + pc.len; ++i)
        written_outside += static_cast<const uint16_t*>(half.raw())[i] != 0;
    EXPECT_EQ(written_outside, 0) << "elements of rank 1's pieces written by rank 0's step";
    shard[1]->step_pieces(pieces_p, g, kRanks[1].pieces, 0.01, pieces_c);
    stream.synchronize();
    const Tensor want = to(whole_c, Device::cpu()), got = to(pieces_c, Device::cpu());
    EXPECT_EQ(std::memcmp(want.raw(), got.raw(), want.nbytes()), 0) << "the copy differs from the whole step's";
    EXPECT_NE(static_cast<const uint16_t*>(got.raw())[kN - 1], 0);  // written at all
  }
}
#endif

}  // namespace
}  // namespace dp::optim
