// Mid-epoch resume of the sampler, also at another world size: the samples a resumed run
// sees are exactly the rest of the epoch's global order (asserted on the sampler positions).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "runtime/data/sampler.h"

namespace dp::data {
namespace {

// What `world` ranks consumed in `steps` steps of `batch` samples each: the first steps*batch
// entries of every rank's order.
std::vector<int64_t> consumed(int64_t n, int world, int64_t steps, int64_t batch, uint64_t seed, uint64_t epoch) {
  std::vector<int64_t> out;
  for (int r = 0; r < world; ++r) {
    auto o = sampler_indices(n, world, r, true, seed, epoch, false);
    out.insert(out.end(), o.begin(), o.begin() + std::min<int64_t>(steps * batch, static_cast<int64_t>(o.size())));
  }
  return out;
}

TEST(DataResumeSampler, SameWorldSizeContinuesEachRanksOrder) {
  for (int world : {1, 2, 3, 4})
    for (int64_t skip_steps : {0, 1, 3}) {
      const int64_t n = 101, batch = 4, skip = skip_steps * batch * world;
      for (int r = 0; r < world; ++r) {
        auto full = sampler_indices(n, world, r, true, 7, 2, false);
        auto rest = sampler_indices_after(n, world, r, true, 7, 2, false, skip);
        ASSERT_EQ(rest, std::vector<int64_t>(full.begin() + skip_steps * batch, full.end())) << world << " " << r;
      }
    }
}

TEST(DataResumeSampler, TwoRanksToOneContinuesAtTheRightSample) {
  const int64_t n = 101, batch = 8, steps = 3;  // 2 ranks consumed 2 * 3 * 8 = 48 samples
  const auto perm = sampler_permutation(n, 7, 1);
  const auto done = consumed(n, 2, steps, batch, 7, 1);
  ASSERT_EQ(done.size(), 48u);
  // The consumed samples are exactly the first 48 of the global order ...
  std::vector<int64_t> a(done), b(perm.begin(), perm.begin() + 48);
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  EXPECT_EQ(a, b);
  // ... and one rank resumes with the other 53, in the global order.
  EXPECT_EQ(sampler_indices_after(n, 1, 0, true, 7, 1, false, 48), std::vector<int64_t>(perm.begin() + 48, perm.end()));
}

TEST(DataResumeSampler, AnotherWorldSizeSharesOutTheRestOnce) {
  const int64_t n = 101;
  const auto perm = sampler_permutation(n, 7, 1);
  for (int world : {2, 3, 4, 5})
    for (int64_t skip : {0, 7, 48, 99}) {
      std::map<int64_t, int> seen;
      size_t len = 0;
      for (int r = 0; r < world; ++r) {
        auto rest = sampler_indices_after(n, world, r, true, 7, 1, false, skip);
        if (r == 0) len = rest.size();
        EXPECT_EQ(rest.size(), len) << "every rank gets the same number of samples";
        for (auto i : rest) seen[i]++;
      }
      // Every sample not yet consumed is seen; consumed ones only as padding (wrap-around).
      for (int64_t k = skip; k < n; ++k) EXPECT_GE(seen[perm[k]], 1) << "world " << world << " skip " << skip;
      int64_t total = 0;
      for (auto& [i, c] : seen) total += c;
      EXPECT_EQ(total, static_cast<int64_t>(len) * world);
      EXPECT_LT(total - (n - skip), world) << "padding is less than one sample per rank";
    }
}

}  // namespace
}  // namespace dp::data
