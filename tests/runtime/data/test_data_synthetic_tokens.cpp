// Tests for make_synthetic_tokens (runtime/data/synthetic_tokens.cpp): a data set of token windows
// reported as token shards report theirs (shape {T}, classes = the vocabulary, T + 1 tokens a
// window); deterministic per (seed, index) whatever the data set's size or the order of reads;
// tokens below the vocabulary and uniform (mean, every byte value hit); windows differ; the bad
// arguments' messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/data/dataset.h"
#include "tests/runtime/data/data_test_util.h"

namespace dp::data {
namespace {

std::vector<uint16_t> window(const Dataset& ds, int64_t i) {
  std::vector<uint16_t> w(static_cast<size_t>(ds.window_tokens()));
  ds.get_tokens(i, w.data());
  return w;
}

TEST(DataSyntheticTokens, ReportsItselfAsTokenShardsDo) {
  const auto ds = make_synthetic_tokens(100, 16, 256, 7);
  EXPECT_TRUE(ds->holds_tokens());
  EXPECT_FALSE(ds->holds_bytes());
  EXPECT_EQ(ds->size(), 100);
  EXPECT_EQ(ds->sample_shape(), (Shape{16}));
  EXPECT_EQ(ds->num_classes(), 256);
  EXPECT_EQ(ds->sample_numel(), 16);
  EXPECT_EQ(ds->window_tokens(), 17);
  EXPECT_EQ(ds->describe(), "synthetic tokens (seed 7): 100 windows of 16 + 1 tokens, vocabulary 256");
  EXPECT_EQ(ds->sample_name(3), "#3");
  float f = 0;
  EXPECT_THROW(ds->get(0, &f), DpError);
  std::vector<uint16_t> w(17);
  EXPECT_THROW(ds->get_tokens(100, w.data()), DpError);
  EXPECT_THROW(ds->get_tokens(-1, w.data()), DpError);
  EXPECT_EQ(make_synthetic_tokens(3, 1, 65536, 7)->num_classes(), 65536);  // GPT-2's and every uint16 token fit
}

TEST(DataSyntheticTokens, DeterministicPerSeedAndIndexWindowsDiffer) {
  const auto a = make_synthetic_tokens(1000, 32, 50257, 11), b = make_synthetic_tokens(1000, 32, 50257, 11);
  const auto c = make_synthetic_tokens(1000, 32, 50257, 12), small = make_synthetic_tokens(50, 32, 50257, 11);
  std::vector<std::vector<uint16_t>> wa(100);
  for (int64_t i = 0; i < 100; ++i) wa[i] = window(*a, i);
  for (int64_t i = 99; i >= 0; --i) EXPECT_EQ(window(*b, i), wa[i]) << i;  // read backwards: the same windows
  EXPECT_EQ(window(*small, 42), wa[42]);  // another size, the same seed: the same window at the same index
  int same_as_other_seed = 0, same_as_next = 0;
  for (int64_t i = 0; i < 100; ++i) {
    same_as_other_seed += window(*c, i) == wa[i];
    if (i + 1 < 100) same_as_next += wa[i] == wa[i + 1];
  }
  EXPECT_EQ(same_as_other_seed, 0);
  EXPECT_EQ(same_as_next, 0);
  // Inside a window the tokens are not one value repeated: 33 draws from 50257 values.
  EXPECT_GT(std::count_if(wa[0].begin(), wa[0].end(), [&](uint16_t t) { return t != wa[0][0]; }), 20);
}

// 2000 windows of 129 byte tokens: every value below 256 appears, none at or above it, and the mean
// is (256 - 1) / 2 = 127.5 within 2.5 (the mean of n = 258000 uniform tokens has standard
// deviation sqrt((256^2 - 1) / 12 / n) = 0.146: 2.5 is 17 of them, far beyond chance, yet a bias of
// a few percent, e.g. a modulo's or a dropped high bit's, fails it).
TEST(DataSyntheticTokens, TokensAreBelowTheVocabularyAndUniform) {
  const auto ds = make_synthetic_tokens(2000, 128, 256, 3);
  std::vector<int64_t> counts(256, 0);
  double sum = 0;
  int64_t n = 0;
  for (int64_t i = 0; i < ds->size(); ++i)
    for (uint16_t t : window(*ds, i)) {
      ASSERT_LT(t, 256);
      ++counts[t], sum += t, ++n;
    }
  EXPECT_EQ(n, 2000 * 129);
  EXPECT_NEAR(sum / static_cast<double>(n), 127.5, 2.5);
  for (int v = 0; v < 256; ++v) EXPECT_GT(counts[v], 0) << v;  // ~1008 expected each
  // GPT-2's vocabulary: below 50257, mean near 25128 (sd of the mean 14508 / sqrt(n) = 40 at n = 129000).
  const auto gpt = make_synthetic_tokens(1000, 128, 50257, 3);
  double gsum = 0;
  for (int64_t i = 0; i < gpt->size(); ++i)
    for (uint16_t t : window(*gpt, i)) {
      ASSERT_LT(t, 50257);
      gsum += t;
    }
  EXPECT_NEAR(gsum / (1000.0 * 129.0), 25128.0, 400.0);
}

TEST(DataSyntheticTokens, BadArgumentsSayWhatToSet) {
  using testing::user_error;
  EXPECT_EQ(user_error([] { make_synthetic_tokens(10, 0, 256, 1); }),
            "model.block_size = 0: token windows need a block size of at least 1");
  EXPECT_EQ(user_error([] { make_synthetic_tokens(10, 8, 0, 1); }),
            "model.vocab_size = 0: synthetic token windows hold uint16 tokens, as token shards do, so the vocabulary "
            "must be 1..65536");
  EXPECT_EQ(user_error([] { make_synthetic_tokens(10, 8, 65537, 1); }),
            "model.vocab_size = 65537: synthetic token windows hold uint16 tokens, as token shards do, so the "
            "vocabulary must be 1..65536");
  EXPECT_EQ(user_error([] { make_synthetic_tokens(-1, 8, 256, 1); }),
            "-1 synthetic token windows (data.synthetic_train + data.synthetic_eval): the count must be in [0, 2^55); "
            "lower data.synthetic_train or data.synthetic_eval");
  EXPECT_EQ(user_error([] { make_synthetic_tokens(int64_t{1} << 55, 8, 256, 1); }),
            "36028797018963968 synthetic token windows (data.synthetic_train + data.synthetic_eval): the count must "
            "be in [0, 2^55); lower data.synthetic_train or data.synthetic_eval");
  EXPECT_EQ(make_synthetic_tokens((int64_t{1} << 55) - 1, 8, 256, 1)->size(), (int64_t{1} << 55) - 1);
}

}  // namespace
}  // namespace dp::data
