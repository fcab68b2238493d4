// The cuDNN algorithm choice is pure host logic: choose_algo over made-up Find results, the
// cache key's equality and hash, and ConvAlgoCache's once-per-key measuring and its error when
// nothing fits, all without a GPU (or cuDNN).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unordered_set>

#include "models/layers/conv2d/conv_algos.h"
#include "base/error.h"
#include "runtime/precision.h"

namespace dp::cuda {
namespace {

using ::testing::HasSubstr;

constexpr int kNotSupported = 9;  // CUDNN_STATUS_NOT_SUPPORTED
constexpr size_t kMiB = size_t{1} << 20;

AlgoPerf perf(int algo, float ms, size_t memory, int math = kCudnnFmaMath, int status = kCudnnStatusSuccess) {
  return {algo, status, ms, memory, math};
}

TEST(ChooseAlgo, TheFastestThatRanAndFits) {
  const std::vector<AlgoPerf> r{perf(0, 3.0f, 0), perf(1, 1.0f, 8 * kMiB), perf(6, 2.0f, 4 * kMiB),
                                perf(2, 0.5f, 0, kCudnnFmaMath, kNotSupported)};
  EXPECT_EQ(choose_algo(r, 64 * kMiB, false), r[1]);     // 0.5 ms did not run
  EXPECT_EQ(choose_algo(r, 8 * kMiB, false), r[1]);      // exactly the limit fits
  EXPECT_EQ(choose_algo(r, 8 * kMiB - 1, false), r[2]);  // one byte short
  EXPECT_EQ(choose_algo(r, 0, false), r[0]);             // only the workspace-free one
}

TEST(ChooseAlgo, NotInCudnnOrder) {
  // cuDNN lists results fastest first, but the choice does not rely on it.
  const std::vector<AlgoPerf> r{perf(5, 4.0f, 0), perf(3, 0.25f, 0), perf(1, 2.0f, 0)};
  EXPECT_EQ(choose_algo(r, 0, false)->algo, 3);
}

TEST(ChooseAlgo, TiesGoToTheEarlierCandidate) {
  const std::vector<AlgoPerf> r{perf(4, 1.0f, 0), perf(2, 1.0f, 0)};
  EXPECT_EQ(choose_algo(r, 0, false)->algo, 4);
}

TEST(ChooseAlgo, FmaOnlySkipsTensorOpResults) {
  const std::vector<AlgoPerf> r{perf(1, 0.1f, 0, kCudnnTensorOpMath), perf(0, 0.9f, 0, kCudnnFmaMath),
                                perf(2, 0.2f, 0, /*CUDNN_DEFAULT_MATH*/ 0)};
  EXPECT_EQ(choose_algo(r, 0, true), r[1]);
  EXPECT_EQ(choose_algo(r, 0, false), r[0]);
}

// A candidate that ran in CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION converted the data to another
// type (cuDNN warns on every call); it never qualifies, however fast.
TEST(ChooseAlgo, NeverACandidateThatConvertsTheData) {
  const std::vector<AlgoPerf> r{perf(1, 0.1f, 0, kCudnnTensorOpMathAllowConversion), perf(0, 0.9f, 0, kCudnnDefaultMath)};
  EXPECT_EQ(choose_algo(r, 0, false), r[1]);
  EXPECT_EQ(choose_algo({r[0]}, 0, false), std::nullopt);
}

TEST(ChooseAlgo, NulloptWhenNothingQualifies) {
  EXPECT_EQ(choose_algo({}, 64 * kMiB, false), std::nullopt);
  const std::vector<AlgoPerf> r{perf(0, 1.0f, 2 * kMiB), perf(1, 1.0f, 0, kCudnnFmaMath, kNotSupported),
                                perf(2, 1.0f, 0, kCudnnTensorOpMath)};
  EXPECT_EQ(choose_algo(r, kMiB, true), std::nullopt);
  EXPECT_EQ(choose_algo(r, kMiB, false), r[2]);
}

ConvKey base_key() {
  return ConvKey{.dtype = DType::BF16, .channels_last = true, .n = 8, .c = 64, .h = 56, .w = 48, .k = 128, .r = 3,
                 .s = 3, .pad = 1, .stride = 2, .groups = 1, .tensor_ops = true};
}

TEST(ConvKey, EveryFieldTellsKeysApartAndEqualKeysHashAlike) {
  const ConvKey a = base_key(), b = base_key();
  EXPECT_EQ(a, b);
  EXPECT_EQ(ConvKeyHash{}(a), ConvKeyHash{}(b));

  std::vector<ConvKey> variants{a};
  auto vary = [&](auto change) {
    ConvKey k = a;
    change(k);
    EXPECT_NE(k, a);
    variants.push_back(k);
  };
  vary([](ConvKey& k) { k.dtype = DType::F16; });
  vary([](ConvKey& k) { k.channels_last = false; });
  vary([](ConvKey& k) { k.n = 16; });
  vary([](ConvKey& k) { k.c = 32; });
  vary([](ConvKey& k) { k.h = 28; });
  vary([](ConvKey& k) { k.w = 28; });
  vary([](ConvKey& k) { k.k = 64; });
  vary([](ConvKey& k) { k.r = 1; });
  vary([](ConvKey& k) { k.s = 1; });
  vary([](ConvKey& k) { k.pad = 0; });
  vary([](ConvKey& k) { k.stride = 1; });
  vary([](ConvKey& k) { k.groups = 2; });
  vary([](ConvKey& k) { k.tensor_ops = false; });
  vary([](ConvKey& k) { k.tf32 = true; });
  vary([](ConvKey& k) { k.align = 4; });
  // The same numbers in other fields: h and w swapped, pad and stride swapped, r and s swapped.
  vary([](ConvKey& k) { k.h = 48, k.w = 56; });
  vary([](ConvKey& k) { k.pad = 2, k.stride = 1; });
  vary([](ConvKey& k) { k.r = 1, k.s = 5; });
  vary([](ConvKey& k) { k.r = 5, k.s = 1; });

  std::unordered_set<ConvKey, ConvKeyHash> keys(variants.begin(), variants.end());
  EXPECT_EQ(keys.size(), variants.size());
  std::unordered_set<size_t> hashes;
  for (const ConvKey& k : variants) hashes.insert(ConvKeyHash{}(k));
  EXPECT_EQ(hashes.size(), variants.size()) << "a single-field change collided in the hash";
}

TEST(ConvKey, DescribesItselfForMessages) {
  EXPECT_EQ(base_key().str(), "bf16 NHWC x[8, 64, 56, 48] w[128, 64, 3, 3] pad 1 stride 2 groups 1 tensor-op math");
  ConvKey k = base_key();
  k.dtype = DType::F32, k.channels_last = false, k.groups = 4, k.tensor_ops = false;
  EXPECT_EQ(k.str(), "f32 NCHW x[8, 64, 56, 48] w[128, 16, 3, 3] pad 1 stride 2 groups 4 FMA math");
  k.align = 4;
  EXPECT_EQ(k.str(), "f32 NCHW x[8, 64, 56, 48] w[128, 16, 3, 3] pad 1 stride 2 groups 4 FMA math, filter 4-byte aligned");
  k.align = 256, k.tf32 = true;
  EXPECT_EQ(k.str(), "f32 NCHW x[8, 64, 56, 48] w[128, 16, 3, 3] pad 1 stride 2 groups 4 TF32 math");
}

// train.tf32 in the legacy convolutions: the math type each key is measured and run in, and
// whether only FMA-math candidates qualify.
TEST(ConvKey, MathTypeFollowsTheDtypeAndTheTf32Policy) {
  ConvKey f32 = base_key();
  f32.dtype = DType::F32, f32.channels_last = false, f32.tensor_ops = false;
  EXPECT_EQ(conv_math_type(f32), kCudnnFmaMath);  // train.tf32 = "off": exact f32
  EXPECT_TRUE(conv_needs_fma_math(f32));
  f32.tf32 = true;  // "conv" or "all"
  EXPECT_EQ(conv_math_type(f32), kCudnnDefaultMath);
  EXPECT_FALSE(conv_needs_fma_math(f32));
  const ConvKey bf16 = base_key();  // 16-bit data: tensor cores whatever the policy, as PyTorch
  EXPECT_EQ(conv_math_type(bf16), kCudnnDefaultMath);  // bf16 runs on tensor cores in the default math
  ConvKey f16 = base_key();
  f16.dtype = DType::F16;
  EXPECT_EQ(conv_math_type(f16), kCudnnTensorOpMath);
  for (ConvKey k : {bf16, f16, f32}) EXPECT_NE(conv_math_type(k), kCudnnTensorOpMathAllowConversion);
  EXPECT_FALSE(conv_needs_fma_math(bf16));
  // The policy's two switches (runtime/precision.h): TF32 in convolutions for conv and all.
  EXPECT_FALSE(tf32_in_convolutions(Tf32::Off));
  EXPECT_TRUE(tf32_in_convolutions(Tf32::Conv));
  EXPECT_TRUE(tf32_in_convolutions(Tf32::All));
  EXPECT_FALSE(tf32_in_matmuls(Tf32::Off));
  EXPECT_FALSE(tf32_in_matmuls(Tf32::Conv));
  EXPECT_TRUE(tf32_in_matmuls(Tf32::All));
}

TEST(ConvKey, PointerAlignmentIsTheLargestPowerOfTwoDividingEveryAddress) {
  alignas(256) static unsigned char buf[1024];
  EXPECT_EQ(pointer_alignment({buf}), 256);
  EXPECT_EQ(pointer_alignment({buf, buf + 512}), 256);
  EXPECT_EQ(pointer_alignment({buf + 64}), 64);
  EXPECT_EQ(pointer_alignment({buf, buf + 6}), 2);   // a 16-bit arena slot at an odd element
  EXPECT_EQ(pointer_alignment({buf + 12, buf + 256}), 4);
  EXPECT_EQ(pointer_alignment({buf + 1}), 1);
}

// A find() that counts its calls and returns canned results.
struct CountingFind {
  std::vector<AlgoPerf> results;
  int calls = 0;
  ConvAlgoCache::Find fn() {
    return [this] {
      ++calls;
      return results;
    };
  }
};

TEST(ConvAlgoCache, MeasuresOncePerPassAndKey) {
  ConvAlgoCache cache;
  CountingFind f{{perf(1, 2.0f, kMiB, kCudnnTensorOpMath), perf(0, 3.0f, 0, kCudnnTensorOpMath)}};
  const ConvKey a = base_key();
  EXPECT_EQ(cache.get(ConvPass::Forward, a, 64 * kMiB, "layer 'c1' (conv2d)", f.fn()).algo, 1);
  EXPECT_EQ(cache.get(ConvPass::Forward, a, 64 * kMiB, "layer 'c2' (conv2d)", f.fn()).algo, 1);
  EXPECT_EQ(f.calls, 1);  // the second layer of the same shape shares the measurement

  f.results = {perf(0, 1.0f, 0, kCudnnTensorOpMath)};
  EXPECT_EQ(cache.get(ConvPass::BackwardData, a, 64 * kMiB, "c1", f.fn()).algo, 0);
  EXPECT_EQ(cache.get(ConvPass::BackwardFilter, a, 64 * kMiB, "c1", f.fn()).algo, 0);
  EXPECT_EQ(f.calls, 3);  // each pass is its own choice
  ConvKey b = a;
  b.stride = 1;
  EXPECT_EQ(cache.get(ConvPass::Forward, b, 64 * kMiB, "c1", f.fn()).algo, 0);
  EXPECT_EQ(f.calls, 4);
  EXPECT_EQ(cache.get(ConvPass::Forward, a, 64 * kMiB, "c1", f.fn()).algo, 1);  // a is still cached
  EXPECT_EQ(f.calls, 4);
  EXPECT_EQ(cache.size(), 4u);
}

TEST(ConvAlgoCache, AChoiceAboveASmallerLimitIsMadeAgain) {
  ConvAlgoCache cache;
  CountingFind f{{perf(1, 1.0f, 32 * kMiB, kCudnnTensorOpMath), perf(0, 3.0f, 0, kCudnnTensorOpMath)}};
  EXPECT_EQ(cache.get(ConvPass::Forward, base_key(), 64 * kMiB, "c", f.fn()).algo, 1);
  EXPECT_EQ(cache.get(ConvPass::Forward, base_key(), 16 * kMiB, "c", f.fn()).algo, 0);
  EXPECT_EQ(f.calls, 2);
  EXPECT_EQ(cache.get(ConvPass::Forward, base_key(), 64 * kMiB, "c", f.fn()).algo, 0);  // fits both: kept
  EXPECT_EQ(f.calls, 2);
}

TEST(ConvAlgoCache, F32KeysWithoutTensorOpsNeedFmaMath) {
  ConvAlgoCache cache;
  ConvKey k = base_key();
  k.dtype = DType::F32, k.channels_last = false, k.tensor_ops = false;
  CountingFind f{{perf(1, 0.5f, 0, kCudnnTensorOpMath), perf(0, 2.0f, 0, kCudnnFmaMath)}};
  EXPECT_EQ(cache.get(ConvPass::Forward, k, 0, "c", f.fn()).algo, 0);
  EXPECT_EQ(cache.get(ConvPass::Forward, base_key(), 0, "c", f.fn()).algo, 1);  // bf16: any math
  k.tf32 = true;  // TF32 allowed: the faster tensor-core candidate, cached apart from the FMA one
  EXPECT_EQ(cache.get(ConvPass::Forward, k, 0, "c", f.fn()).algo, 1);
  EXPECT_EQ(cache.size(), 3u);
}

TEST(ConvAlgoCache, NothingFitsNamesLayerShapeAndLimitAndCachesNothing) {
  ConvAlgoCache cache;
  CountingFind f{{perf(1, 1.0f, 96 * kMiB, kCudnnTensorOpMath), perf(4, 0.0f, 0, kCudnnTensorOpMath, kNotSupported)}};
  try {
    cache.get(ConvPass::BackwardFilter, base_key(), 64 * kMiB, "layer 'layer3.0.conv2' (conv2d)", f.fn());
    FAIL() << "expected DpError";
  } catch (const DpError& e) {
    EXPECT_THAT(e.what(), HasSubstr("layer 'layer3.0.conv2' (conv2d): no cuDNN backward-filter algorithm for "
                                    "bf16 NHWC x[8, 64, 56, 48] w[128, 64, 3, 3] pad 1 stride 2 groups 1 tensor-op "
                                    "math runs within the workspace limit of 67108864 bytes (64.0 MiB)"));
    EXPECT_THAT(e.what(), HasSubstr("algo 1 (1 ms, 96.0 MiB, math 1), algo 4 (cuDNN status 9)"));
    EXPECT_THAT(e.what(), HasSubstr("larger workspace limit"));
  }
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.get(ConvPass::BackwardFilter, base_key(), 128 * kMiB, "c", f.fn()).algo, 1);
  EXPECT_EQ(f.calls, 2);
}

TEST(ConvAlgoCache, AFailingFindCachesNothing) {
  ConvAlgoCache cache;
  int calls = 0;
  EXPECT_THROW(cache.get(ConvPass::Forward, base_key(), kMiB, "c",
                         [&]() -> std::vector<AlgoPerf> {
                           ++calls;
                           throw DpError("cudnnFind failed");
                         }),
               DpError);
  EXPECT_EQ(cache.size(), 0u);
  CountingFind f{{perf(2, 1.0f, 0, kCudnnTensorOpMath)}};
  EXPECT_EQ(cache.get(ConvPass::Forward, base_key(), kMiB, "c", f.fn()).algo, 2);  // the lock was released
  EXPECT_EQ(calls, 1);
}

TEST(ConvAlgoCache, GlobalIsOneInstance) { EXPECT_EQ(&ConvAlgoCache::global(), &ConvAlgoCache::global()); }

}  // namespace
}  // namespace dp::cuda
