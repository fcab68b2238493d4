// kernels/cuda/tokens.h against its CPU twin (kernels/cpu/tokens.h): token windows widened and
// split into inputs and targets, bit for bit, guard regions intact; on the CUDA emulator in CI.
#include <gtest/gtest.h>

#include "tests/gpu_test.h"
#include "kernels/cpu/tokens.h"

#ifdef DPTRAIN_HAVE_CUDA
#include "kernels/cuda/tokens.h"
#include "tests/kernels/cuda_test_util.h"
#endif

namespace dp::kernels::cuda {
namespace {

TEST(CudaTokensMath, TheCpuTwinSplitsWindowsIntoInputsAndTargets) {
  const std::vector<uint16_t> w = {1, 2, 3, 65535, 7, 8, 9, 10};  // 2 windows of T + 1 = 4
  std::vector<int32_t> x(6), y(6);
  cpu::split_token_windows(w.data(), 2, 3, x.data(), y.data());
  EXPECT_EQ(x, (std::vector<int32_t>{1, 2, 3, 7, 8, 9}));
  EXPECT_EQ(y, (std::vector<int32_t>{2, 3, 65535, 8, 9, 10}));
}

#ifdef DPTRAIN_HAVE_CUDA
TEST(CudaTokens, ArgumentsAreCheckedBeforeAnyLaunch) {
  EXPECT_EQ(split_token_windows(nullptr, -1, 4, nullptr, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(split_token_windows(nullptr, 3, 0, nullptr, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(split_token_windows(nullptr, 0, 4, nullptr, nullptr, nullptr), cudaSuccess);
}

class CudaTokensGpu : public test::GpuTest {};

DP_GPU_TEST_F(CudaTokensGpu, SplitEqualsTheCpuTwinBitForBit) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  const cudaStream_t s = stream_.get();
  for (auto [rows, T] : {std::pair<int64_t, int64_t>{1, 1}, {3, 7}, {16, 64}, {5, 1023}}) {
    std::vector<uint16_t> w(static_cast<size_t>(rows * (T + 1)));
    for (auto& t : w) t = static_cast<uint16_t>(gen_());
    std::vector<int32_t> x(static_cast<size_t>(rows * T)), y(x.size());
    cpu::split_token_windows(w.data(), rows, T, x.data(), y.data());
    test::Guarded<uint16_t> w_(w, s);
    test::Guarded<int32_t> x_(x.size(), s), y_(y.size(), s);
    CHECK_CUDA(split_token_windows(w_.get(), rows, T, x_.get(), y_.get(), s));
    EXPECT_EQ(x_.download(), x) << rows << "x" << T;
    EXPECT_EQ(y_.download(), y) << rows << "x" << T;
    EXPECT_TRUE(x_.guards_intact() && y_.guards_intact());
  }
}
#endif

}  // namespace
}  // namespace dp::kernels::cuda
