// kernels/cuda/augment.h against its CPU twin, data::apply_transform (after U8Dataset::get's
// float(b) / 255 for byte samples, and base/half.h's cast for bf16/f16): the element
// functions on the host over every layout and transform option (run without a GPU), then the
// kernel itself for u8/f32 input, f32/bf16/f16 output, NCHW/NHWC, batches around the grid cap,
// with guard regions (skip without a GPU). Equality is bit for bit throughout.
#include <gtest/gtest.h>

#ifdef DPTRAIN_HAVE_CUDA
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "base/half.h"
#include "kernels/cuda/augment.h"
#include "runtime/data/transform.h"
#include "tests/kernels/cuda_test_util.h"

namespace dp::kernels::cuda {
namespace {

struct Case {
  const char* name;
  int pad;
  bool flip, norm;
};
const Case kCases[] = {{"identity", 0, false, false}, {"normalise", 0, false, true}, {"crop", 2, false, false},
                       {"flip", 0, true, false},      {"crop+flip", 3, true, false}, {"all", 4, true, true}};

data::Transform transform_of(const Case& k, int64_t channels) {
  data::Transform t;
  t.crop_padding = k.pad;
  t.hflip = k.flip;
  if (k.norm)
    for (int64_t c = 0; c < channels; ++c) {
      t.mean.push_back(0.1f + 0.3f * static_cast<float>(c));
      t.std.push_back(0.2f + 0.7f * static_cast<float>(c));
    }
  return t;
}

// The CPU side: raw batch (NCHW) -> apply_transform per row -> f32 (B, C, H, W), NCHW.
template <typename In>
std::vector<float> cpu_twin(const std::vector<In>& in, const AugmentDims& d, const data::Transform& t, uint64_t seed,
                            uint64_t epoch, const std::vector<int64_t>& indices) {
  const int64_t numel = d.channels * d.height * d.width;
  const Shape shape{d.channels, d.height, d.width};
  std::vector<float> out(static_cast<size_t>(d.batch * numel)), unit(static_cast<size_t>(numel));
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t j = 0; j < numel; ++j) {
      const In v = in[b * numel + j];
      if constexpr (std::is_same_v<In, uint8_t>)
        unit[j] = static_cast<float>(v) / 255.0f;  // U8Dataset::get
      else
        unit[j] = v;
    }
    data::apply_transform(t, shape, seed, epoch, indices[b], unit.data(), out.data() + b * numel);
  }
  return out;
}

// Storage index of logical (b, c, y, x).
int64_t storage_index(const AugmentPixel& p, const AugmentDims& d, bool nhwc) {
  return nhwc ? ((p.b * d.height + p.y) * d.width + p.x) * d.channels + p.c
              : ((p.b * d.channels + p.c) * d.height + p.y) * d.width + p.x;
}

template <typename In>
std::vector<In> random_raw(int64_t n, std::mt19937_64& g) {
  std::vector<In> v(static_cast<size_t>(n));
  if constexpr (std::is_same_v<In, uint8_t>) {
    for (auto& x : v) x = static_cast<uint8_t>(g());
  } else {
    std::uniform_real_distribution<float> u(-1.0f, 2.0f);
    for (auto& x : v) x = u(g);
  }
  return v;
}

std::vector<int64_t> random_indices(int64_t n, std::mt19937_64& g) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (auto& i : v) i = static_cast<int64_t>(g() % 1000000);
  return v;
}

TEST(CudaAugment, ArgumentsAreCheckedBeforeAnyLaunch) {
  int dummy = 0;
  void* p = &dummy;
  const int32_t* ch = &dummy;
  const float m = 0.5f;
  const AugmentDims ok{2, 3, 4, 5};
  auto call = [&](void* out, const void* in, AugmentDims d, const int32_t* c, int pad, const float* mean,
                  const float* stdv, AugmentOut o = AugmentOut::F32, AugmentIn i = AugmentIn::U8) {
    return augment_batch(out, o, false, in, i, d, c, pad, mean, stdv, nullptr);
  };
  EXPECT_EQ(call(p, &m, {-1, 3, 4, 5}, ch, 0, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(call(p, &m, {2, 0, 4, 5}, ch, 0, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(call(p, &m, {2, 3, 4, 0}, ch, 0, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(call(p, &m, ok, ch, -1, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(call(p, &m, ok, ch, 0, &m, nullptr), cudaErrorInvalidValue);    // mean without std
  EXPECT_EQ(call(nullptr, &m, ok, ch, 0, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(call(p, nullptr, ok, ch, 0, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(call(p, &m, ok, nullptr, 0, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(call(p, p, ok, ch, 0, nullptr, nullptr), cudaErrorInvalidValue);  // out aliases in
  EXPECT_EQ(call(p, &m, ok, ch, 0, nullptr, nullptr, static_cast<AugmentOut>(7)), cudaErrorInvalidValue);
  EXPECT_EQ(call(p, &m, ok, ch, 0, nullptr, nullptr, AugmentOut::F32, static_cast<AugmentIn>(7)),
            cudaErrorInvalidValue);
  EXPECT_EQ(call(nullptr, nullptr, {0, 3, 4, 5}, nullptr, 0, nullptr, nullptr), cudaSuccess);  // empty batch
}

TEST(CudaAugment, PixelOfWalksEachLayoutInStorageOrder) {
  const AugmentDims d{3, 4, 5, 6};
  const int64_t n = d.batch * d.channels * d.height * d.width;
  for (bool nhwc : {false, true}) {
    for (int64_t i = 0; i < n; ++i) {
      const AugmentPixel p = augment_pixel_of(i, d, nhwc);
      ASSERT_TRUE(p.b >= 0 && p.b < d.batch && p.c >= 0 && p.c < d.channels && p.y >= 0 && p.y < d.height &&
                  p.x >= 0 && p.x < d.width);
      ASSERT_EQ(storage_index(p, d, nhwc), i) << (nhwc ? "nhwc " : "nchw ") << i;
    }
  }
  // NHWC: channels vary fastest.
  const AugmentPixel p = augment_pixel_of(1, d, true);
  EXPECT_EQ(p.c, 1);
  EXPECT_EQ(p.x, 0);
}

// The kernel's element functions, run on the host, equal apply_transform bit for bit, for every
// transform option, both raw types and both layouts.
template <typename In>
void check_element_functions(std::mt19937_64& g) {
  for (const AugmentDims d : {AugmentDims{5, 3, 7, 6}, AugmentDims{4, 1, 5, 5}}) {
    const auto raw = random_raw<In>(d.batch * d.channels * d.height * d.width, g);
    const auto idx = random_indices(d.batch, g);
    for (const Case& k : kCases) {
      SCOPED_TRACE(k.name);
      const data::Transform t = transform_of(k, d.channels);
      const auto want = cpu_twin(raw, d, t, 3, 2, idx);
      std::vector<int32_t> choices(static_cast<size_t>(d.batch * 3));
      data::pack_augment_choices(t, 3, 2, idx.data(), d.batch, choices.data());
      const float* mean = k.norm ? t.mean.data() : nullptr;
      const float* stdv = k.norm ? t.std.data() : nullptr;
      for (bool nhwc : {false, true})
        for (int64_t i = 0; i < static_cast<int64_t>(want.size()); ++i) {
          const AugmentPixel p = augment_pixel_of(i, d, nhwc);
          const float got = augment_value(raw.data(), d, p, choices.data() + 3 * p.b, k.pad, mean, stdv);
          ASSERT_TRUE(test::same_bits(got, want[storage_index(p, d, false)]))
              << (nhwc ? "nhwc " : "nchw ") << i << ": " << got << " vs " << want[storage_index(p, d, false)];
        }
    }
  }
}

TEST(CudaAugment, ElementFunctionsEqualApplyTransformBitForBit) {
  std::mt19937_64 g(42);
  check_element_functions<uint8_t>(g);
  check_element_functions<float>(g);
}

class CudaAugmentGpu : public test::GpuTest {
 protected:
  // One kernel run against the twin: out in `out` dtype and layout, compared bit for bit.
  template <typename In>
  void check(AugmentDims d, const Case& k, AugmentOut out, bool nhwc) {
    SCOPED_TRACE(testing::Message() << "seed " << seed_ << ", " << k.name << ", B " << d.batch << " C "
                                    << d.channels << " H " << d.height << " W " << d.width << ", out "
                                    << static_cast<int>(out) << (nhwc ? " nhwc" : " nchw"));
    const cudaStream_t s = stream_.get();
    const int64_t n = d.batch * d.channels * d.height * d.width;
    const auto raw = random_raw<In>(n, gen_);
    const auto idx = random_indices(d.batch, gen_);
    const data::Transform t = transform_of(k, d.channels);
    const uint64_t seed = gen_(), epoch = gen_() % 100;
    const auto want = cpu_twin(raw, d, t, seed, epoch, idx);
    std::vector<int32_t> choices(static_cast<size_t>(d.batch * 3));
    data::pack_augment_choices(t, seed, epoch, idx.data(), d.batch, choices.data());
    std::vector<float> norm = t.mean;
    norm.insert(norm.end(), t.std.begin(), t.std.end());
    if (norm.empty()) norm.push_back(0.0f);  // a valid buffer; not passed without normalisation
    test::Guarded<In> in_(raw, s);
    test::Guarded<int32_t> ch_(choices, s);
    test::Guarded<float> norm_(norm, s);
    const float* mean = k.norm ? norm_.get() : nullptr;
    const float* stdv = k.norm ? norm_.get() + d.channels : nullptr;
    const AugmentIn in_type = std::is_same_v<In, uint8_t> ? AugmentIn::U8 : AugmentIn::F32;
    int64_t bad = 0;
    auto expect = [&](int64_t i) { return want[storage_index(augment_pixel_of(i, d, nhwc), d, false)]; };
    if (out == AugmentOut::F32) {
      test::Guarded<float> out_(static_cast<size_t>(n), s);
      CHECK_CUDA(augment_batch(out_.get(), out, nhwc, in_.get(), in_type, d, ch_.get(), k.pad, mean, stdv, s));
      const auto got = out_.download();
      for (int64_t i = 0; i < n; ++i)
        if (!test::same_bits(got[i], expect(i)) && bad++ < 5)
          ADD_FAILURE() << "element " << i << ": " << got[i] << " vs " << expect(i);
      EXPECT_TRUE(out_.guards_intact());
    } else {
      test::Guarded<uint16_t> out_(static_cast<size_t>(n), s);
      CHECK_CUDA(augment_batch(out_.get(), out, nhwc, in_.get(), in_type, d, ch_.get(), k.pad, mean, stdv, s));
      const auto got = out_.download();
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t w = out == AugmentOut::BF16 ? cpu::f32_to_bf16(expect(i)) : cpu::f32_to_f16(expect(i));
        if (got[i] != w && bad++ < 5) ADD_FAILURE() << "element " << i << ": " << got[i] << " vs " << w;
      }
      EXPECT_TRUE(out_.guards_intact());
    }
    EXPECT_EQ(bad, 0);
    EXPECT_TRUE(in_.guards_intact());
  }
};

DP_GPU_TEST_F(CudaAugmentGpu, F32NchwEqualsTheTwin) {
  for (const Case& k : kCases)
    for (int64_t b : {1, 37}) {
      check<uint8_t>({b, 3, 32, 32}, k, AugmentOut::F32, false);
      check<float>({b, 3, 32, 32}, k, AugmentOut::F32, false);
      check<uint8_t>({b, 1, 28, 28}, k, AugmentOut::F32, false);
    }
}

DP_GPU_TEST_F(CudaAugmentGpu, HalfPrecisionNhwcEqualsTheTwin) {
  for (const Case& k : kCases)
    for (AugmentOut out : {AugmentOut::BF16, AugmentOut::F16}) {
      check<uint8_t>({19, 3, 32, 32}, k, out, true);
      check<float>({5, 3, 9, 13}, k, out, true);
      check<uint8_t>({7, 1, 28, 28}, k, out, true);
    }
  // And the remaining combinations once.
  check<float>({6, 3, 16, 16}, kCases[5], AugmentOut::F32, true);
  check<uint8_t>({6, 3, 16, 16}, kCases[5], AugmentOut::BF16, false);
  check<float>({6, 3, 16, 16}, kCases[5], AugmentOut::F16, false);
}

// More elements than the grid's threads (2^16 blocks x 256): the grid-stride loop covers the rest.
DP_GPU_TEST_F(CudaAugmentGpu, BatchesBeyondTheGridCapAreCovered) {
  check<uint8_t>({120, 3, 224, 224}, kCases[5], AugmentOut::BF16, true);
}

}  // namespace
}  // namespace dp::kernels::cuda
#endif  // DPTRAIN_HAVE_CUDA
