// kernels/cuda/layout.h: the NCHW <-> NHWC transposes. Host tests (every CUDA build): the
// batched-matrix view of each direction, nhwc_offset against the layer tests' own index formula
// (and a bijection), argument checks. GPU tests (skip without a GPU): each dtype against the
// host permutation, raw bits, with guard regions, over shapes around the 32 x 32 tile, and a
// round trip.
#include <gtest/gtest.h>

#ifdef DPTRAIN_HAVE_CUDA
#include <cstring>
#include <vector>

#include "kernels/cuda/layout.h"
#include "tests/kernels/cuda_test_util.h"

namespace dp::kernels::cuda {
namespace {

TEST(CudaLayout, EachDirectionIsOneBatchedTranspose) {
  const TransposeDims to = layout_transpose_dims(true, 2, 3, 4, 5);
  EXPECT_EQ(to.batch, 2);
  EXPECT_EQ(to.rows, 3);
  EXPECT_EQ(to.cols, 20);
  const TransposeDims from = layout_transpose_dims(false, 2, 3, 4, 5);
  EXPECT_EQ(from.batch, 2);
  EXPECT_EQ(from.rows, 20);
  EXPECT_EQ(from.cols, 3);
}

TEST(CudaLayout, NhwcOffsetIsABijectionWithTheExpectedOrder) {
  const int64_t N = 2, C = 3, H = 4, W = 5;
  std::vector<int> seen(N * C * H * W, 0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) {
          const int64_t i = ((n * C + c) * H + h) * W + w;
          const int64_t j = nhwc_offset(i, C, H, W);
          ASSERT_EQ(j, ((n * H + h) * W + w) * C + c);
          ++seen[j];
        }
  for (int k : seen) EXPECT_EQ(k, 1);
}

TEST(CudaLayout, ArgumentsAreCheckedBeforeAnyLaunch) {
  EXPECT_EQ(nchw_to_nhwc(DType::F32, nullptr, nullptr, -1, 1, 1, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(nhwc_to_nchw(DType::F32, nullptr, nullptr, 1, 1, -1, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(nchw_to_nhwc(DType::F64, nullptr, nullptr, 1, 1, 1, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(nchw_to_nhwc(DType::I32, nullptr, nullptr, 1, 1, 1, 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(nchw_to_nhwc(DType::BF16, nullptr, nullptr, 0, 3, 4, 5, nullptr), cudaSuccess);
  EXPECT_EQ(nhwc_to_nchw(DType::F16, nullptr, nullptr, 2, 3, 0, 5, nullptr), cudaSuccess);
}

class CudaLayoutGpu : public test::GpuTest {};

// The permutation on raw elements of type E (uint32_t for f32, uint16_t for bf16/f16).
// N = 70,000 batches is over gridDim.z's 65,535, so blocks loop over the batch (grid stride):
// checked for f32 only (`split_batch`), as that loop is the same template code for every element
// width and, on the CUDA emulator, its 70,000 blocks of 256 threads take about 33 s per dtype (a
// 2-core EPYC 7003).
template <typename E>
void check_dtype(DType dt, std::mt19937_64& gen, cudaStream_t s, bool split_batch) {
  struct Shape4 { int64_t N, C, H, W; };
  std::vector<Shape4> shapes{{1, 1, 1, 1}, {2, 3, 4, 5}, {3, 32, 8, 4}, {2, 33, 7, 9}, {4, 64, 14, 14}, {1, 2048, 7, 7}};
  if (split_batch) shapes.push_back({70000, 2, 1, 1});
  for (Shape4 sh : shapes) {
    SCOPED_TRACE(testing::Message() << dtype_name(dt) << " " << sh.N << "x" << sh.C << "x" << sh.H << "x" << sh.W);
    const int64_t n = sh.N * sh.C * sh.H * sh.W;
    std::vector<E> x(n);
    for (auto& v : x) v = static_cast<E>(gen());
    std::vector<E> want(n);
    for (int64_t i = 0; i < n; ++i) want[nhwc_offset(i, sh.C, sh.H, sh.W)] = x[i];
    test::Guarded<E> x_(x, s), y_(n, s), back_(n, s);
    CHECK_CUDA(nchw_to_nhwc(dt, y_.get(), x_.get(), sh.N, sh.C, sh.H, sh.W, s));
    EXPECT_EQ(y_.download(), want);
    CHECK_CUDA(nhwc_to_nchw(dt, back_.get(), y_.get(), sh.N, sh.C, sh.H, sh.W, s));
    EXPECT_EQ(back_.download(), x);
    EXPECT_TRUE(y_.guards_intact());
    EXPECT_TRUE(back_.guards_intact());
  }
}

DP_GPU_TEST_F(CudaLayoutGpu, TransposesEqualTheHostPermutation) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  check_dtype<uint32_t>(DType::F32, gen_, s(), true);
  check_dtype<uint16_t>(DType::BF16, gen_, s(), false);
  check_dtype<uint16_t>(DType::F16, gen_, s(), false);
}

}  // namespace
}  // namespace dp::kernels::cuda
#else
TEST(CudaLayout, NeedsACudaBuild) { GTEST_SKIP() << "built without CUDA"; }
#endif
