// kernels/cuda/synthetic.h, the GPU generator of the synthetic data set, against the CPU one
// (data::make_synthetic's get(), which draws its Philox stream in order, then data::apply_transform's
// normalisation and base/half.h's cast, laid out NCHW or NHWC): labels and every value bit for bit,
// for f32 / bf16 / f16, both layouts, with and without normalisation, scattered sample indices,
// with guard regions (on a GPU, and on the CUDA emulator in CI). The label draw by position
// (kernels/synthetic_math.h) is held to Rng::below on the host for many streams and class counts.
// The token windows of a model that takes tokens (synthetic_token_windows) against
// data::make_synthetic_tokens' get_tokens, split into inputs and targets: every token, for GPT-2's
// and the bytes' vocabularies, indices up to 2^55 - 1; the token by position against Rng's draws.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "tests/gpu_test.h"
#include "kernels/synthetic_math.h"
#include "runtime/data/dataset.h"
#include "runtime/data/keyed_rng.h"

#ifdef DPTRAIN_HAVE_CUDA
#include "base/half.h"
#include "kernels/cuda/synthetic.h"
#include "runtime/data/transform.h"
#include "tests/kernels/cuda_test_util.h"
#endif

namespace dp::kernels::cuda {
namespace {

TEST(CudaSyntheticMath, LabelByPositionIsRngBelowAndWordsAreRngsDraws) {
  std::mt19937_64 g(5);
  for (uint64_t classes : {uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{10}, uint64_t{1000}, uint64_t{999999937}}) {
    for (int k = 0; k < 2000; ++k) {
      const uint64_t seed = g(), index = g() >> 9;  // an index below 2^55
      Rng rng = data::keyed_rng(seed, kStreamData, index);
      const int32_t want = static_cast<int32_t>(rng.below(classes));
      const SyntheticLabel l = synthetic_label(seed, synthetic_stream(index), classes);
      ASSERT_EQ(l.label, want) << "classes " << classes << " seed " << seed << " index " << index;
      ASSERT_EQ(l.words, classes <= 1 ? 0u : 2u);  // one 64-bit draw (a rejection is ~1e-10 likely)
      // The next words the CPU draws are the pixels' noise, words l.words, l.words + 1, ...
      for (uint32_t j = 0; j < 6; ++j) ASSERT_EQ(rng.next_u32(), synthetic_word(seed, synthetic_stream(index), l.words + j));
    }
  }
  EXPECT_EQ(synthetic_uniform(0xFFFFFFFFu), 16777215.0f / 16777216.0f);
  EXPECT_EQ(synthetic_uniform(0xFFu), 0.0f);  // the low 8 bits do not count
}

// Token j by position is Rng's j-th draw mapped by multiply-shift: floor(word * vocab / 2^32).
TEST(CudaSyntheticMath, TokenByPositionIsTheMultiplyShiftOfRngsDraws) {
  std::mt19937_64 g(6);
  for (uint64_t vocab : {uint64_t{1}, uint64_t{2}, uint64_t{256}, uint64_t{50257}, uint64_t{65536}}) {
    for (int k = 0; k < 200; ++k) {
      const uint64_t seed = g(), index = g() >> 9;  // an index below 2^55
      Rng rng = data::keyed_rng(seed, kStreamData, index);
      for (uint64_t j = 0; j < 11; ++j) {
        const uint32_t word = rng.next_u32();
        const uint32_t want = static_cast<uint32_t>((static_cast<uint64_t>(word) * vocab) >> 32);
        ASSERT_EQ(synthetic_token(seed, synthetic_stream(index), j, vocab), want) << "vocab " << vocab << " j " << j;
        ASSERT_LT(want, vocab);
      }
    }
  }
  EXPECT_EQ(synthetic_token_of(0u, 50257), 0u);
  EXPECT_EQ(synthetic_token_of(0xFFFFFFFFu, 50257), 50256u);  // the top word: the last token
  EXPECT_EQ(synthetic_token_of(0x80000000u, 256), 128u);
  EXPECT_EQ(synthetic_token_of(0x12345678u, 65536), 0x1234u);  // 2^16 tokens: the word's high half
  EXPECT_EQ(synthetic_token_of(0xFFFFFFFFu, 1), 0u);
}

#ifdef DPTRAIN_HAVE_CUDA

class CudaSyntheticGpu : public test::GpuTest {};

// The CPU loader's batch: get() per row, then the transform's normalisation, then the dtype's
// bytes in the layout (d: the input pipeline's (C, H, W) view of the sample).
std::vector<unsigned char> cpu_batch(const data::Dataset& ds, const std::vector<int64_t>& indices,
                                     const data::Transform& t, const AugmentDims& d, DType dtype, bool nhwc,
                                     std::vector<int32_t>& labels) {
  const Shape shape = ds.sample_shape();
  const int64_t numel = shape_numel(shape);
  std::vector<float> raw(static_cast<size_t>(numel)), v(static_cast<size_t>(numel));
  const size_t es = dtype_size(dtype);
  std::vector<unsigned char> out(static_cast<size_t>(d.batch * numel) * es);
  labels.clear();
  for (int64_t b = 0; b < d.batch; ++b) {
    labels.push_back(ds.get(indices[b], raw.data()));
    data::apply_transform(t, shape, 0, 0, indices[b], raw.data(), v.data());
    for (int64_t c = 0; c < d.channels; ++c)
      for (int64_t y = 0; y < d.height; ++y)
        for (int64_t x = 0; x < d.width; ++x) {
          const float f = v[static_cast<size_t>((c * d.height + y) * d.width + x)];
          const int64_t i = nhwc ? ((b * d.height + y) * d.width + x) * d.channels + c
                                 : ((b * d.channels + c) * d.height + y) * d.width + x;
          if (dtype == DType::F32) {
            std::memcpy(&out[static_cast<size_t>(i) * 4], &f, 4);
          } else {
            const uint16_t h = dtype == DType::BF16 ? cpu::f32_to_bf16(f) : cpu::f32_to_f16(f);
            std::memcpy(&out[static_cast<size_t>(i) * 2], &h, 2);
          }
        }
  }
  return out;
}

AugmentOut out_type(DType t) {
  return t == DType::F32 ? AugmentOut::F32 : t == DType::BF16 ? AugmentOut::BF16 : AugmentOut::F16;
}

DP_GPU_TEST_F(CudaSyntheticGpu, BatchesEqualTheCpuGeneratorInEveryDtypeAndLayout) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  struct Case {
    Shape shape;
    int classes;
    bool nhwc;
    AugmentDims view;  // the (C, H, W) the input pipeline sees (launch/device_input.h input_geometry)
  };
  const Case cases[] = {{{3, 5, 7}, 10, false, {0, 3, 5, 7}},
                        {{3, 5, 7}, 1000, true, {0, 3, 5, 7}},
                        {{1, 9, 4}, 3, true, {0, 1, 9, 4}},
                        {{6, 10}, 7, false, {0, 6, 1, 10}}};  // not (C, H, W): channels x the rest
  const uint64_t data_seed = 12345;
  for (const Case& k : cases) {
    const auto ds = data::make_synthetic(100000, k.shape, k.classes, data_seed);
    std::vector<int64_t> indices;
    std::uniform_int_distribution<int64_t> pick(0, 99999);
    for (int r = 0; r < 13; ++r) indices.push_back(pick(gen_));
    indices[0] = 99999;
    AugmentDims d = k.view;
    d.batch = static_cast<int64_t>(indices.size());
    for (bool norm : {false, true})
      for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
        SCOPED_TRACE(testing::Message() << shape_str(k.shape) << " classes " << k.classes << (k.nhwc ? " NHWC " : " NCHW ")
                                        << dtype_name(dt) << (norm ? " normalised" : ""));
        data::Transform t;
        if (norm)
          for (int64_t c = 0; c < d.channels; ++c) {
            t.mean.push_back(0.45f + 0.01f * static_cast<float>(c));
            t.std.push_back(0.22f + 0.03f * static_cast<float>(c));
          }
        std::vector<int32_t> want_labels;
        const auto want = cpu_batch(*ds, indices, t, d, dt, k.nhwc, want_labels);

        test::Guarded<int64_t> idx(indices, s());
        test::Guarded<int32_t> y(indices.size(), s());
        test::Guarded<uint32_t> words(indices.size(), s());
        test::Guarded<unsigned char> x(want.size(), s());
        std::vector<float> norm_host = t.mean;
        norm_host.insert(norm_host.end(), t.std.begin(), t.std.end());
        test::Guarded<float> mean_std(norm ? norm_host : std::vector<float>{0.0f}, s());
        const float* mean = norm ? mean_std.get() : nullptr;
        const float* stdv = norm ? mean_std.get() + d.channels : nullptr;
        CHECK_CUDA(synthetic_labels(y.get(), words.get(), idx.get(), d.batch, data_seed, k.classes, s()));
        CHECK_CUDA(synthetic_batch(x.get(), out_type(dt), k.nhwc, d, idx.get(), y.get(), words.get(), data_seed, mean,
                                   stdv, s()));
        EXPECT_EQ(y.download(), want_labels);
        const auto got = x.download();
        ASSERT_EQ(got.size(), want.size());
        size_t first_bad = got.size();
        for (size_t i = 0; i < got.size() && first_bad == got.size(); ++i)
          if (got[i] != want[i]) first_bad = i;
        EXPECT_EQ(first_bad, got.size()) << "first differing byte " << first_bad << " of " << got.size();
        EXPECT_TRUE(x.guards_intact() && y.guards_intact() && words.guards_intact());
      }
  }
}

// The CPU data set's windows (rows, T + 1) split into inputs x (rows, T) and targets y (rows, T).
void cpu_windows(const data::Dataset& ds, const std::vector<int64_t>& indices, std::vector<int32_t>& x,
                 std::vector<int32_t>& y) {
  const int64_t T = ds.sample_numel();
  std::vector<uint16_t> w(static_cast<size_t>(T + 1));
  x.clear(), y.clear();
  for (int64_t i : indices) {
    ds.get_tokens(i, w.data());
    x.insert(x.end(), w.begin(), w.end() - 1);
    y.insert(y.end(), w.begin() + 1, w.end());
  }
}

DP_GPU_TEST_F(CudaSyntheticGpu, TokenWindowsEqualTheCpuDataSetsWindows) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  const int64_t n = (int64_t{1} << 55) - 1;  // every index the data set has: the largest ones too
  for (int64_t vocab : {int64_t{256}, int64_t{50257}})
    for (int64_t T : {int64_t{1}, int64_t{7}, int64_t{64}}) {
      SCOPED_TRACE(testing::Message() << "vocab " << vocab << " T " << T);
      const uint64_t data_seed = 12345 + static_cast<uint64_t>(T);
      const auto ds = data::make_synthetic_tokens(n, T, vocab, data_seed);
      std::vector<int64_t> indices = {0, 1, n - 1, n - 2, int64_t{1} << 40, (int64_t{1} << 32) + 7};
      std::uniform_int_distribution<int64_t> pick(0, n - 1);
      for (int r = 0; r < 7; ++r) indices.push_back(pick(gen_));
      std::vector<int32_t> want_x, want_y;
      cpu_windows(*ds, indices, want_x, want_y);
      const int64_t rows = static_cast<int64_t>(indices.size());
      test::Guarded<int64_t> idx(indices, s());
      test::Guarded<int32_t> x(want_x.size(), s()), y(want_y.size(), s());
      CHECK_CUDA(synthetic_token_windows(x.get(), y.get(), idx.get(), rows, T, data_seed, vocab, s()));
      EXPECT_EQ(x.download(), want_x);
      EXPECT_EQ(y.download(), want_y);
      EXPECT_TRUE(x.guards_intact() && y.guards_intact());
    }
}

TEST(CudaSynthetic, ArgumentsAreCheckedBeforeAnyLaunch) {
  EXPECT_EQ(synthetic_labels(nullptr, nullptr, nullptr, -1, 0, 10, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(synthetic_labels(nullptr, nullptr, nullptr, 4, 0, 0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(synthetic_labels(nullptr, nullptr, nullptr, 0, 0, 10, nullptr), cudaSuccess);
  EXPECT_EQ(synthetic_labels(nullptr, nullptr, nullptr, 4, 0, 10, nullptr), cudaErrorInvalidValue);
  const AugmentDims d{2, 3, 4, 5};
  float f = 0;
  EXPECT_EQ(synthetic_batch(nullptr, AugmentOut::F32, false, d, nullptr, nullptr, nullptr, 0, nullptr, nullptr, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(synthetic_batch(nullptr, AugmentOut::F32, false, {0, 3, 4, 5}, nullptr, nullptr, nullptr, 0, nullptr,
                            nullptr, nullptr),
            cudaSuccess);
  EXPECT_EQ(synthetic_batch(nullptr, AugmentOut::F32, false, {0, 3, 4, 5}, nullptr, nullptr, nullptr, 0, &f, nullptr,
                            nullptr),
            cudaErrorInvalidValue);  // mean without std
  EXPECT_EQ(synthetic_batch(nullptr, AugmentOut::F32, false, {1, 0, 4, 5}, nullptr, nullptr, nullptr, 0, nullptr,
                            nullptr, nullptr),
            cudaErrorInvalidValue);
  int32_t i = 0;
  int64_t k = 0;
  EXPECT_EQ(synthetic_token_windows(&i, &i, &k, -1, 4, 0, 256, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(synthetic_token_windows(&i, &i, &k, 1, 0, 0, 256, nullptr), cudaErrorInvalidValue);   // T < 1
  EXPECT_EQ(synthetic_token_windows(&i, &i, &k, 1, 4, 0, 0, nullptr), cudaErrorInvalidValue);     // vocab < 1
  EXPECT_EQ(synthetic_token_windows(&i, &i, &k, 1, 4, 0, 65537, nullptr), cudaErrorInvalidValue); // not uint16
  EXPECT_EQ(synthetic_token_windows(nullptr, nullptr, nullptr, 0, 4, 0, 256, nullptr), cudaSuccess);
  EXPECT_EQ(synthetic_token_windows(&i, nullptr, &k, 1, 4, 0, 256, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(synthetic_token_windows(&i, &i, nullptr, 1, 4, 0, 256, nullptr), cudaErrorInvalidValue);
}

#endif  // DPTRAIN_HAVE_CUDA

}  // namespace
}  // namespace dp::kernels::cuda
