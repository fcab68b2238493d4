// models/layers/embedding/embedding_kernels.h against the CPU twin (embedding_ref.h): the gather
// and the scatter-add bit for bit (the kernel adds in the twin's order, m ascending, per column),
// repeated ids included (their rows sum in order); an id outside [0, V) gives a NaN row and is
// skipped by the backward. Guard regions catch out-of-bounds writes.
#include <gtest/gtest.h>

#include "tests/gpu_test.h"

#ifdef DPTRAIN_HAVE_CUDA
#include <cmath>

#include "base/half.h"
#include "models/layers/embedding/embedding_kernels.h"
#include "models/layers/embedding/embedding_ref.h"
#include "tests/kernels/cuda_test_util.h"

namespace dp::kernels::cuda {
namespace {

TEST(CudaEmbedding, ArgumentsAreCheckedBeforeAnyLaunch) {
  EXPECT_EQ(embedding_forward(DType::F32, nullptr, nullptr, nullptr, -1, 4, 4, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(embedding_forward(DType::F32, nullptr, nullptr, nullptr, 2, 0, 4, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(embedding_forward(DType::I32, nullptr, nullptr, nullptr, 2, 4, 4, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(embedding_backward(DType::F32, nullptr, nullptr, nullptr, 2, 4, 0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(embedding_backward(DType::F64, nullptr, nullptr, nullptr, 2, 4, 4, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(embedding_backward(DType::BF16, nullptr, nullptr, nullptr, 0, 4, 4, nullptr), cudaSuccess);
}

class CudaEmbeddingGpu : public test::GpuTest {};

DP_GPU_TEST_F(CudaEmbeddingGpu, GatherAndScatterAddEqualTheCpuTwinBitForBit) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  const cudaStream_t s = stream_.get();
  struct Case { int64_t M, V, D; };
  for (Case c : {Case{1, 1, 1}, Case{32, 5, 24}, Case{40, 300, 33}}) {  // V < M: many repeats
    SCOPED_TRACE(testing::Message() << "M " << c.M << " V " << c.V << " D " << c.D);
    std::vector<int32_t> ids(c.M);
    for (auto& i : ids) i = static_cast<int32_t>(gen_() % c.V);
    const auto w = test::normal_floats(c.V * c.D, gen_), dy = test::normal_floats(c.M * c.D, gen_);
    const auto dw0 = test::normal_floats(c.V * c.D, gen_);
    std::vector<float> y(c.M * c.D), dw = dw0;
    cpu::embedding_forward(y.data(), ids.data(), w.data(), c.M, c.D);
    cpu::embedding_backward(dw.data(), ids.data(), dy.data(), c.M, c.D);
    test::Guarded<int32_t> ids_(ids, s);
    test::Guarded<float> w_(w, s), y_(c.M * c.D, s), dy_(dy, s), dw_(dw0, s);
    CHECK_CUDA(embedding_forward(DType::F32, y_.get(), ids_.get(), w_.get(), c.M, c.V, c.D, s));
    CHECK_CUDA(embedding_backward(DType::F32, dw_.get(), ids_.get(), dy_.get(), c.M, c.V, c.D, s));
    const auto gy = y_.download(), gdw = dw_.download();
    for (size_t i = 0; i < y.size(); ++i) ASSERT_TRUE(test::same_bits(gy[i], y[i])) << "y " << i;
    for (size_t i = 0; i < dw.size(); ++i) ASSERT_TRUE(test::same_bits(gdw[i], dw[i])) << "dw " << i;
    EXPECT_TRUE(y_.guards_intact());
    EXPECT_TRUE(dw_.guards_intact());
  }
}

// 16-bit activations (the GPU's mixed precision): y is the f32 row rounded once, dy is widened and
// added onto the f32 table gradient in the twin's order: bit for bit the twin on the same values.
DP_GPU_TEST_F(CudaEmbeddingGpu, SixteenBitRowsAreTheRoundedTableAndGradientsAddInF32) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  const cudaStream_t s = stream_.get();
  const int64_t M = 37, V = 9, D = 19;
  for (DType dt : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(dt));
    auto to16 = [&](float v) { return dt == DType::BF16 ? cpu::f32_to_bf16(v) : cpu::f32_to_f16(v); };
    auto to32 = [&](uint16_t v) { return dt == DType::BF16 ? cpu::bf16_to_f32(v) : cpu::f16_to_f32(v); };
    std::vector<int32_t> ids(M);
    for (auto& i : ids) i = static_cast<int32_t>(gen_() % V);
    const auto w = test::normal_floats(V * D, gen_), dw0 = test::normal_floats(V * D, gen_);
    std::vector<float> dy = test::normal_floats(M * D, gen_);
    std::vector<uint16_t> dy16(M * D);
    for (int64_t i = 0; i < M * D; ++i) dy16[i] = to16(dy[i]), dy[i] = to32(dy16[i]);
    std::vector<float> y(M * D), dw = dw0;
    cpu::embedding_forward(y.data(), ids.data(), w.data(), M, D);
    cpu::embedding_backward(dw.data(), ids.data(), dy.data(), M, D);
    test::Guarded<int32_t> ids_(ids, s);
    test::Guarded<float> w_(w, s), dw_(dw0, s);
    test::Guarded<uint16_t> y_(M * D, s), dy_(dy16, s);
    CHECK_CUDA(embedding_forward(dt, y_.get(), ids_.get(), w_.get(), M, V, D, s));
    CHECK_CUDA(embedding_backward(dt, dw_.get(), ids_.get(), dy_.get(), M, V, D, s));
    const auto gy = y_.download();
    const auto gdw = dw_.download();
    int64_t bad = 0;
    for (int64_t i = 0; i < M * D; ++i) bad += gy[i] != to16(y[i]);
    for (int64_t i = 0; i < V * D; ++i) bad += !test::same_bits(gdw[i], dw[i]);
    EXPECT_EQ(bad, 0);
    EXPECT_TRUE(y_.guards_intact());
    EXPECT_TRUE(dw_.guards_intact());
  }
}

DP_GPU_TEST_F(CudaEmbeddingGpu, AnIdOutOfRangeGivesANanRowAndIsSkippedByTheBackward) {
  const cudaStream_t s = stream_.get();
  const int64_t V = 3, D = 4;
  const std::vector<int32_t> ids = {1, 3, -1, 2};
  const std::vector<float> w = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  test::Guarded<int32_t> ids_(ids, s);
  test::Guarded<float> w_(w, s), y_(4 * D, s), dy_(std::vector<float>(4 * D, 1.0f), s),
      dw_(std::vector<float>(V * D, 0.0f), s);
  CHECK_CUDA(embedding_forward(DType::F32, y_.get(), ids_.get(), w_.get(), 4, V, D, s));
  CHECK_CUDA(embedding_backward(DType::F32, dw_.get(), ids_.get(), dy_.get(), 4, V, D, s));
  const auto y = y_.download(), dw = dw_.download();
  for (int64_t d = 0; d < D; ++d) {
    EXPECT_EQ(y[d], 4 + d);
    EXPECT_TRUE(std::isnan(y[D + d]));
    EXPECT_TRUE(std::isnan(y[2 * D + d]));
    EXPECT_EQ(y[3 * D + d], 8 + d);
    EXPECT_EQ(dw[d], 0.0f);
    EXPECT_EQ(dw[D + d], 1.0f);
    EXPECT_EQ(dw[2 * D + d], 1.0f);
  }
}

}  // namespace
}  // namespace dp::kernels::cuda
#endif
