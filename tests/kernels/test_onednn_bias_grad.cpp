// The linear layer's bias gradient on the oneDNN backend: column sums of dy in f64, the rows in
// order, added to db. Checked against the plain loop bit for bit, on shapes that cover a partial
// slab, whole rows on one thread, several slabs (wider than a slab: 4,133 columns) and the
// single-threaded small case, at 1 and 2 threads.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <vector>

#include "base/rng.h"
#include "kernels/cpu/onednn_matmul.h"

namespace dp::kernels::cpu::onednn {
namespace {

std::vector<float> reference(const std::vector<float>& db0, const std::vector<float>& dy, int64_t M, int64_t O) {
  std::vector<float> db = db0;
  for (int64_t c = 0; c < O; ++c) {
    double s = 0;
    for (int64_t m = 0; m < M; ++m) s += dy[m * O + c];
    db[c] += static_cast<float>(s);
  }
  return db;
}

TEST(OneDnnBiasGrad, EqualsTheRowOrderF64SumBitForBitOnAnyThreadCount) {
  const int saved = omp_get_max_threads();
  Rng rng(5, 1);
  for (const auto& [M, O] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 7}, {64, 65}, {257, 384},
                                                                     {300, 1153}, {4096, 1536}, {40, 4133}}) {
    std::vector<float> dy(M * O), db0(O);
    for (float& v : dy) v = static_cast<float>(rng.uniform() * 2 - 1) * 1e3f;  // cancellation shows order
    for (float& v : db0) v = static_cast<float>(rng.uniform());
    const std::vector<float> want = reference(db0, dy, M, O);
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      std::vector<float> db = db0;
      bias_grad_add(db.data(), dy.data(), M, O);
      EXPECT_EQ(std::memcmp(db.data(), want.data(), O * sizeof(float)), 0)
          << "M " << M << ", O " << O << ", " << threads << " threads";
    }
  }
  omp_set_num_threads(saved);
}

}  // namespace
}  // namespace dp::kernels::cpu::onednn
