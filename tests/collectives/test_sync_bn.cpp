// SyncBN (model.sync_bn): W ranks, each with b rows of a batch, over the ring collectives, give
// what one process gives with all W*b rows: the same output rows, running statistics, input
// gradients, and weight/bias gradients whose sum over the ranks is the one process's.
#include <gtest/gtest.h>

#include <cmath>

#include "collectives/ring/ring_communicator.h"
#include "models/layers/batchnorm2d/batchnorm2d.h"
#include "tests/collectives/ring_harness.h"
#include "tests/models/layer_harness.h"

namespace dp {
namespace {

using test::LayerCase;

const LayerCase kCase{"syncbn", "batchnorm2d", {{"momentum", ArgValue{0.2}}}, {{3, 4, 5}}, 2, true};
constexpr int64_t kRowsPerRank = 2;

double max_abs_diff(const Tensor& a, const Tensor& b) {
  double worst = 0;
  for (int64_t i = 0; i < b.numel(); ++i) worst = std::max(worst, std::abs(test::get(a, i) - test::get(b, i)));
  return worst;
}

struct Reference {
  Tensor x, dy, y, dx;
  std::vector<Tensor> grads, buffers;
};

// One process over all rows. Deterministic: every rank recomputes it.
Reference reference(int world) {
  Reference r;
  test::TestLayer t = test::make_test_layer(kCase, DType::F64, 7);
  Rng rng(11, 3);
  r.x = test::random_normal(with_batch(world * kRowsPerRank, kCase.in[0]), DType::F64, rng);
  r.dy = test::random_normal(r.x.shape(), DType::F64, rng);
  const StepContext ctx{true, 1, 1};
  r.y = t.forward(ctx, {r.x});
  r.dx = t.backward(ctx, {r.x}, r.y, r.dy)[0];
  for (const auto& g : t.grads) r.grads.push_back(g.clone());
  for (const auto& b : t.buffers) r.buffers.push_back(b.clone());
  return r;
}

// Rank r's errors against the reference, with SyncBN on or off.
std::string run_rank(Bootstrap& bs, bool sync, double& worst) {
  const int world = bs.size(), r = bs.rank();
  const Reference ref = reference(world);
  test::TestLayer t = test::make_test_layer(kCase, DType::F64, 7);
  dynamic_cast<models::BatchNorm2d&>(*t.layer).set_sync(sync);
  auto comm = make_ring_communicator(bs, 30.0);
  const StepContext ctx{true, 1, 1, comm.get()};
  const Tensor x = ref.x.narrow0(r * kRowsPerRank, kRowsPerRank).clone();
  const Tensor dy = ref.dy.narrow0(r * kRowsPerRank, kRowsPerRank).clone();
  const Tensor y = t.forward(ctx, {x});
  const Tensor dx = t.backward(ctx, {x}, y, dy)[0];
  // Weight and bias gradients are this rank's share: summed over ranks they are the whole batch's.
  for (const auto& g : t.grads) comm->allreduce(g, ReduceOp::Sum);
  worst = 0;
  std::string where;
  auto note = [&](const char* what, double e) {
    if (e > worst) worst = e, where = what;
  };
  note("output", max_abs_diff(y, ref.y.narrow0(r * kRowsPerRank, kRowsPerRank)));
  note("input gradient", max_abs_diff(dx, ref.dx.narrow0(r * kRowsPerRank, kRowsPerRank)));
  note("weight gradient", max_abs_diff(t.grads[0], ref.grads[0]));
  note("bias gradient", max_abs_diff(t.grads[1], ref.grads[1]));
  note("running_mean", max_abs_diff(t.buffers[0], ref.buffers[0]));
  note("running_var", max_abs_diff(t.buffers[1], ref.buffers[1]));
  note("num_batches_tracked", std::abs(static_cast<double>(t.buffers[2].data<int64_t>()[0] -
                                                           ref.buffers[2].data<int64_t>()[0])));
  return fmt::format("rank {}: worst {:.3g} ({})", r, worst, where);
}

class SyncBn : public testing::TestWithParam<int> {};

TEST_P(SyncBn, RanksTogetherEqualOneProcessOverTheWholeBatch) {
  const int world = GetParam();
  auto results = ringtest::run_ranks(
      world,
      [](Bootstrap& bs, ringtest::SharedState* s, int r) {
        double worst = 0;
        const std::string line = run_rank(bs, /*sync=*/true, worst);
        ringtest::report(s, r, line);
        return worst <= 1e-12 ? 0 : 1;
      },
      /*limit_s=*/60);
  EXPECT_EQ(ringtest::all_exited_with(results, 0), "");
}

// The control: plain batch norm on each rank's rows is measurably different, so the test above
// can tell SyncBN from local statistics.
TEST_P(SyncBn, LocalStatisticsDifferFromTheWholeBatch) {
  const int world = GetParam();
  auto results = ringtest::run_ranks(
      world,
      [](Bootstrap& bs, ringtest::SharedState* s, int r) {
        double worst = 0;
        const std::string line = run_rank(bs, /*sync=*/false, worst);
        ringtest::report(s, r, line);
        return worst > 1e-3 ? 0 : 1;
      },
      /*limit_s=*/60);
  EXPECT_EQ(ringtest::all_exited_with(results, 0), "");
}

INSTANTIATE_TEST_SUITE_P(Ranks, SyncBn, testing::Values(2, 3));

}  // namespace
}  // namespace dp
