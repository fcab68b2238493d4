// kernels/cuda/label_rank.h against its CPU twin (kernels/cpu/label_rank.h): each row's true-class
// rank (classes scoring strictly higher, capped), ties counting for the label, invalid labels
// never hits: the top-1 / top-5 counts (token accuracy) the GPU computes without copying logits.
// On the CUDA emulator in CI.
#include <gtest/gtest.h>

#include <random>
#include <tuple>

#include "tests/gpu_test.h"
#include "kernels/cpu/label_rank.h"

#ifdef DPTRAIN_HAVE_CUDA
#include "kernels/cuda/label_rank.h"
#include "tests/kernels/cuda_test_util.h"
#endif

namespace dp::kernels::cuda {
namespace {

TEST(CudaLabelRankMath, TheCpuTwinCountsHigherScoresTiesForTheLabel) {
  const std::vector<float> z = {0.1f, 0.5f, 0.5f, 0.2f,   // label 1: nothing strictly higher (a tie)
                                0.9f, 0.8f, 0.7f, 0.6f,   // label 3: 3 higher
                                1.0f, 2.0f, 3.0f, 4.0f};  // label 7: outside [0, 4)
  const std::vector<int32_t> y = {1, 3, 7};
  std::vector<int32_t> r(3);
  cpu::label_ranks(z.data(), y.data(), 3, 4, 5, r.data());
  EXPECT_EQ(r, (std::vector<int32_t>{0, 3, 5}));
  cpu::label_ranks(z.data(), y.data(), 3, 4, 2, r.data());  // capped
  EXPECT_EQ(r, (std::vector<int32_t>{0, 2, 2}));
}

// Padded rows (a padded LM head's, ld > K): the padding is never read, however it scores.
TEST(CudaLabelRankMath, PaddedRowsRankAsTheirFirstKColumns) {
  const std::vector<float> z = {0.1f, 0.5f, 0.5f, 0.2f, 9.0f, 9.0f,   // label 1: 0 higher (the padding is not)
                                0.9f, 0.8f, 0.7f, 0.6f, 9.0f, 9.0f};  // label 3: 3 higher
  const std::vector<int32_t> y = {1, 3};
  std::vector<int32_t> r(2);
  cpu::label_ranks(z.data(), y.data(), 2, 4, 5, r.data(), /*ld=*/6);
  EXPECT_EQ(r, (std::vector<int32_t>{0, 3}));
}

#ifdef DPTRAIN_HAVE_CUDA
TEST(CudaLabelRank, ArgumentsAreCheckedBeforeAnyLaunch) {
  EXPECT_EQ(label_ranks(nullptr, nullptr, 3, 4, 5, nullptr, nullptr, /*ld=*/3), cudaErrorInvalidValue);
  EXPECT_EQ(label_ranks(nullptr, nullptr, -1, 4, 5, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(label_ranks(nullptr, nullptr, 3, 0, 5, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(label_ranks(nullptr, nullptr, 3, 4, 0, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(label_ranks(nullptr, nullptr, 0, 4, 5, nullptr, nullptr), cudaSuccess);
}

class CudaLabelRankGpu : public test::GpuTest {};

DP_GPU_TEST_F(CudaLabelRankGpu, RanksEqualTheCpuTwin) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  const cudaStream_t s = stream_.get();
  for (auto [rows, K] : {std::pair<int64_t, int64_t>{1, 1}, {37, 10}, {300, 257}, {9, 5000}}) {
    std::vector<float> z(static_cast<size_t>(rows * K));
    std::uniform_int_distribution<int> coarse(0, 7);  // few distinct values: many ties
    for (auto& v : z) v = static_cast<float>(coarse(gen_)) * 0.25f;
    std::vector<int32_t> y(static_cast<size_t>(rows));
    std::uniform_int_distribution<int32_t> label(-1, static_cast<int32_t>(K));  // a few invalid ones
    for (auto& v : y) v = label(gen_);
    std::vector<int32_t> want(y.size());
    cpu::label_ranks(z.data(), y.data(), rows, K, 5, want.data());
    test::Guarded<float> z_(z, s);
    test::Guarded<int32_t> y_(y, s), out_(y.size(), s);
    CHECK_CUDA(label_ranks(z_.get(), y_.get(), rows, K, 5, out_.get(), s));
    EXPECT_EQ(out_.download(), want) << rows << "x" << K;
    EXPECT_TRUE(out_.guards_intact());
  }
}

// Rows of ld > K (a padded LM head's logits): the ranks of the compact rows, the padding (scoring
// above everything) never read.
DP_GPU_TEST_F(CudaLabelRankGpu, PaddedRowsRankAsTheCompactOnes) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  const cudaStream_t s = stream_.get();
  for (auto [rows, K, ld] : {std::tuple<int64_t, int64_t, int64_t>{37, 10, 64}, {300, 65, 128}, {9, 257, 320}}) {
    std::vector<float> compact(static_cast<size_t>(rows * K)), padded(static_cast<size_t>(rows * ld), 1e30f);
    std::uniform_int_distribution<int> coarse(0, 7);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < K; ++k)
        compact[r * K + k] = padded[r * ld + k] = static_cast<float>(coarse(gen_)) * 0.25f;
    std::vector<int32_t> y(static_cast<size_t>(rows));
    std::uniform_int_distribution<int32_t> label(-1, static_cast<int32_t>(K));
    for (auto& v : y) v = label(gen_);
    std::vector<int32_t> want(y.size()), cpu_padded(y.size());
    cpu::label_ranks(compact.data(), y.data(), rows, K, 5, want.data());
    cpu::label_ranks(padded.data(), y.data(), rows, K, 5, cpu_padded.data(), ld);
    EXPECT_EQ(cpu_padded, want);
    test::Guarded<float> z_(padded, s);
    test::Guarded<int32_t> y_(y, s), out_(y.size(), s);
    CHECK_CUDA(label_ranks(z_.get(), y_.get(), rows, K, 5, out_.get(), s, ld));
    EXPECT_EQ(out_.download(), want) << rows << "x" << K << " in rows of " << ld;
    EXPECT_TRUE(out_.guards_intact());
  }
}
#endif

}  // namespace
}  // namespace dp::kernels::cuda
