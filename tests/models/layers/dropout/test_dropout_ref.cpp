// The CPU dropout masks (models/layers/dropout/dropout_ref.h, and the attention's dropout_logical,
// models/layers/attention/attention_ref.h), drawn many words at a time since issue 33, against the
// scalar code they replaced: one Philox block per word and a double compare of the 24-bit uniform
// (u = (r >> 8) 2^-24 >= p), kept elements times the scale in T. Bit for bit, for f32 and f64,
// lengths around the 256-word chunks and the 4096-element tasks (and one long enough to run on
// threads), starts not on a block, and p on and off the 2^-24 grid.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "base/philox.h"
#include "base/rng.h"
#include "kernels/cpu/philox_words.h"
#include "models/layers/attention/attention_ref.h"
#include "models/layers/dropout/dropout_ref.h"

namespace dp::kernels::cpu {
namespace {

// The replaced code: element k has index first + k.
template <typename T>
std::vector<T> reference(const std::vector<T>& in, uint64_t first, double p, uint64_t seed, uint64_t stream) {
  const T scale = static_cast<T>(1.0 / (1.0 - p));
  std::vector<T> out(in.size());
  for (size_t k = 0; k < in.size(); ++k) {
    const uint64_t idx = first + k;
    uint32_t r[4];
    Philox::block(seed, idx / 4, stream, r);
    const double u = static_cast<double>(r[idx % 4] >> 8) * (1.0 / 16777216.0);
    out[k] = u >= p ? in[k] * scale : T(0);
  }
  return out;
}

// Normal values with the awkward ones mixed in: zeros of both signs, infinities, a NaN, denormals.
template <typename T>
std::vector<T> inputs(size_t n, uint64_t seed) {
  Rng rng(seed, 1);
  std::vector<T> v(n);
  const T odd[] = {T(0), -T(0), std::numeric_limits<T>::infinity(), -std::numeric_limits<T>::infinity(),
                   std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::denorm_min()};
  for (size_t i = 0; i < n; ++i) v[i] = i % 97 < 6 ? odd[i % 97] : static_cast<T>(rng.normal());
  return v;
}

template <typename T>
void expect_bits(const std::vector<T>& got, const std::vector<T>& want, const char* what, double p, uint64_t first) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k)
    ASSERT_EQ(std::memcmp(&got[k], &want[k], sizeof(T)), 0)
        << what << " p " << p << " first " << first << " n " << got.size() << " element " << k << ": " << got[k]
        << " vs " << want[k];
}

const std::vector<double> kPs = {0.1, 0.5, 1.0 / 3, 0x1p-24, 3 * 0x1p-24, 0x1p-25, 1 - 0x1p-24, 0.999999};
const std::vector<size_t> kLengths = {0, 1, 3, 4, 5, 17, 63, 255, 256, 257, 1000, 4095, 4096, 4097, 9000, 40001};

template <typename T>
void forward_and_backward_equal_the_scalar_code() {
  uint64_t seed = 11;
  for (double p : kPs)
    for (size_t n : kLengths) {
      const std::vector<T> x = inputs<T>(n, ++seed);
      const uint64_t stream = seed * 0x9E3779B97F4A7C15ull;
      const std::vector<T> want = reference(x, 0, p, seed, stream);
      std::vector<T> y(n), dx(n);
      dropout_forward<T>(y.data(), x.data(), static_cast<int64_t>(n), p, seed, stream);
      expect_bits(y, want, "forward", p, 0);
      dropout_backward<T>(dx.data(), x.data(), static_cast<int64_t>(n), p, seed, stream);
      expect_bits(dx, want, "backward", p, 0);
      std::vector<T> inplace = x;  // the attention applies its mask in place
      dropout_forward<T>(inplace.data(), inplace.data(), static_cast<int64_t>(n), p, seed, stream);
      expect_bits(inplace, want, "in place", p, 0);
      if (testing::Test::HasFatalFailure()) return;
    }
}

TEST(DropoutRef, ForwardAndBackwardEqualTheScalarCodeF32) { forward_and_backward_equal_the_scalar_code<float>(); }
TEST(DropoutRef, ForwardAndBackwardEqualTheScalarCodeF64) { forward_and_backward_equal_the_scalar_code<double>(); }

// The attention's rows start anywhere: ((n H + h) T + i) T + j.
template <typename T>
void logical_indices_equal_the_scalar_code() {
  const std::vector<uint64_t> firsts = {0, 1, 2, 3, 5, 63, 65, 127 * 128 + 3, (uint64_t{1} << 34) - 7, 0x123456789ull};
  uint64_t seed = 5;
  for (double p : kPs)
    for (uint64_t first : firsts)
      for (size_t n : {size_t{1}, size_t{2}, size_t{7}, size_t{64}, size_t{65}, size_t{129}, size_t{300}}) {
        const std::vector<T> x = inputs<T>(n, ++seed);
        const AttnDropout d{p, seed, ~seed};
        std::vector<T> out(n);
        dropout_logical(out.data(), x.data(), static_cast<int64_t>(n), first, d);
        expect_bits(out, reference(x, first, p, d.seed, d.stream), "dropout_logical", p, first);
        // One draw applied twice (the flash core's backward masks P and dP with the same words).
        std::vector<uint32_t> words(n);
        philox_words(words.data(), static_cast<int64_t>(n), first, d.seed, d.stream);
        std::vector<T> again(n);
        dropout_apply_words(again.data(), x.data(), static_cast<int64_t>(n), words.data(), DropoutKeep<T>(p));
        expect_bits(again, out, "dropout_apply_words", p, first);
        if (testing::Test::HasFatalFailure()) return;
      }
}

TEST(DropoutRef, AttentionLogicalIndicesEqualTheScalarCodeF32) { logical_indices_equal_the_scalar_code<float>(); }
TEST(DropoutRef, AttentionLogicalIndicesEqualTheScalarCodeF64) { logical_indices_equal_the_scalar_code<double>(); }

}  // namespace
}  // namespace dp::kernels::cpu
