// models/layers/position_embedding/position_embedding_kernels.h against the CPU twin
// (position_embedding_ref.h in f32 on the values the GPU sees): the same f32 operations in the
// same order, so the same bits, in f32 and 16-bit (rounded once); the table's gradient
// accumulates onto what was there. Runs on the CUDA emulator in CI and on a GPU in the runbook.
#include <gtest/gtest.h>

#ifdef DPTRAIN_HAVE_CUDA
#include <vector>

#include "base/half.h"
#include "models/layers/position_embedding/position_embedding_kernels.h"
#include "models/layers/position_embedding/position_embedding_ref.h"
#include "tests/kernels/cuda_test_util.h"

namespace dp::kernels::cuda {
namespace {

TEST(CudaPositionEmbedding, ArgumentsAreCheckedBeforeAnyLaunch) {
  EXPECT_EQ(position_embedding_forward(DType::F32, nullptr, nullptr, nullptr, -1, 2, 2, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(position_embedding_forward(DType::I32, nullptr, nullptr, nullptr, 1, 2, 2, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(position_embedding_forward(DType::BF16, nullptr, nullptr, nullptr, 1, 0, 2, nullptr), cudaSuccess);
  EXPECT_EQ(position_embedding_backward(DType::F16, nullptr, nullptr, 2, 2, -3, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(position_embedding_backward(DType::F32, nullptr, nullptr, 0, 2, 2, nullptr), cudaSuccess);
}

class CudaPositionEmbeddingGpu : public test::GpuTest {};

DP_GPU_TEST_F(CudaPositionEmbeddingGpu, EqualsTheCpuTwinBitForBit) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    const int64_t N = 3, Tn = 5, C = 67, P = 7;  // a table longer than the sequence
    SCOPED_TRACE(dtype_name(dt));
    const int64_t n = N * Tn * C;
    auto to16 = [&](float v) { return dt == DType::BF16 ? cpu::f32_to_bf16(v) : cpu::f32_to_f16(v); };
    auto to32 = [&](uint16_t v) { return dt == DType::BF16 ? cpu::bf16_to_f32(v) : cpu::f16_to_f32(v); };
    std::vector<float> x = test::normal_floats(n, gen_), dy = test::normal_floats(n, gen_);
    const std::vector<float> w = test::normal_floats(P * C, gen_), dw0 = test::normal_floats(P * C, gen_);
    std::vector<uint16_t> x16(n), dy16(n);
    if (dt != DType::F32)
      for (int64_t i = 0; i < n; ++i) x16[i] = to16(x[i]), dy16[i] = to16(dy[i]), x[i] = to32(x16[i]), dy[i] = to32(dy16[i]);
    std::vector<float> y(n), dw = dw0;
    cpu::position_embedding_forward<float>(y.data(), x.data(), w.data(), N, Tn, C);
    cpu::position_embedding_backward<float>(dw.data(), dy.data(), N, Tn, C);
    test::Guarded<float> w_(w, s()), dw_(dw0, s());
    std::vector<float> gy(n);
    if (dt == DType::F32) {
      test::Guarded<float> x_(x, s()), dy_(dy, s()), y_(n, s());
      CHECK_CUDA(position_embedding_forward(dt, y_.get(), x_.get(), w_.get(), N, Tn, C, s()));
      CHECK_CUDA(position_embedding_backward(dt, dw_.get(), dy_.get(), N, Tn, C, s()));
      gy = y_.download();
      EXPECT_TRUE(y_.guards_intact());
    } else {
      test::Guarded<uint16_t> x_(x16, s()), dy_(dy16, s()), y_(n, s());
      CHECK_CUDA(position_embedding_forward(dt, y_.get(), x_.get(), w_.get(), N, Tn, C, s()));
      CHECK_CUDA(position_embedding_backward(dt, dw_.get(), dy_.get(), N, Tn, C, s()));
      const auto h = y_.download();
      for (int64_t i = 0; i < n; ++i) gy[i] = to32(h[i]), y[i] = to32(to16(y[i]));
      EXPECT_TRUE(y_.guards_intact());
    }
    const auto gdw = dw_.download();
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) bad += !test::same_bits(gy[i], y[i]);
    for (int64_t i = 0; i < P * C; ++i) bad += !test::same_bits(gdw[i], dw[i]);  // rows >= Tn untouched
    EXPECT_EQ(bad, 0);
    EXPECT_TRUE(dw_.guards_intact());
  }
}

}  // namespace
}  // namespace dp::kernels::cuda
#endif
