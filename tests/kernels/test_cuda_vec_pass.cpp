// The element-wise passes that move 16-byte vectors (kernels/cuda/pass_shape.h, vec_pass.cuh) at
// every alignment: each kernel of elementwise.h, cast.h, accumulate.h and optim.h run on
// operands that start 0 .. W-1 elements past a 16-byte boundary (the parameter arena packs
// tensors without padding: a slot may start anywhere), with the same offset for every operand
// (a scalar head, vectors, a scalar tail) and with different offsets (the scalar fallback), over
// lengths that are not multiples of the vector width. The results equal the CPU twins bit for bit
// (a NaN only has to stay a NaN) and no element outside [offset, offset + n) of an output
// changes, nor the guard regions around it. On a GPU, and on the CUDA emulator in CI.
#include <gtest/gtest.h>

#ifdef DPTRAIN_HAVE_CUDA
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tests/gpu_test.h"
#include "base/half.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/optim_adamw.h"
#include "kernels/cpu/optim_sgd.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cuda/accumulate.h"
#include "kernels/cuda/cast.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/optim.h"
#include "tests/kernels/cuda_test_util.h"

namespace dp::kernels::cuda {
namespace {

constexpr int64_t kPad = 16;  // elements of slack on each side of a window
// Lengths: shorter than a vector, a vector and a bit, many vectors and an odd tail.
const int64_t kLengths[] = {1, 3, 9, 1003};

// n elements of T at element offset `off` of a guarded device buffer of n + 2 kPad elements; the
// rest of the buffer holds known filler, so a write outside the window is seen.
template <typename T>
class Window {
 public:
  Window(const std::vector<T>& values, int64_t off, const std::vector<T>& filler, cudaStream_t s)
      : off_(off), n_(static_cast<int64_t>(values.size())), all_(filler), buf_(filler.size(), s) {
    for (int64_t i = 0; i < n_; ++i) all_[static_cast<size_t>(kPad + off_ + i)] = values[static_cast<size_t>(i)];
    buf_.upload(all_);
  }
  T* get() const { return buf_.get() + kPad + off_; }
  std::vector<T> download() const {
    const std::vector<T> all = buf_.download();
    return std::vector<T>(all.begin() + kPad + off_, all.begin() + kPad + off_ + n_);
  }
  // Nothing outside the window changed: the filler and the guard regions.
  bool outside_intact() const {
    const std::vector<T> all = buf_.download();
    for (size_t i = 0; i < all.size(); ++i) {
      const bool inside = static_cast<int64_t>(i) >= kPad + off_ && static_cast<int64_t>(i) < kPad + off_ + n_;
      if (!inside && std::memcmp(&all[i], &all_[i], sizeof(T)) != 0) return false;
    }
    return buf_.guards_intact();
  }

 private:
  int64_t off_, n_;
  std::vector<T> all_;
  test::Guarded<T> buf_;
};

class CudaVecPassGpu : public test::GpuTest {
 protected:
  template <typename T>
  std::vector<T> filler(int64_t n) {
    std::vector<T> f(static_cast<size_t>(n + 2 * kPad));
    for (auto& v : f) {
      const uint32_t r = static_cast<uint32_t>(gen_());
      std::memcpy(&v, &r, sizeof(T));
    }
    return f;
  }
  template <typename T>
  Window<T> window(const std::vector<T>& values, int64_t off) {
    return Window<T>(values, off, filler<T>(static_cast<int64_t>(values.size())), s());
  }
  std::vector<float> floats(int64_t n, float stddev = 1.0f) { return test::normal_floats(static_cast<size_t>(n), gen_, stddev); }
};

// Offsets for a pass of width W over operands: every common offset, then a few mixed ones.
std::vector<std::vector<int64_t>> offset_sets(int width, int operands) {
  std::vector<std::vector<int64_t>> out;
  for (int o = 0; o < width; ++o) out.push_back(std::vector<int64_t>(static_cast<size_t>(operands), o));
  if (operands > 1)
    for (int o = 1; o < 3; ++o) {
      std::vector<int64_t> mixed(static_cast<size_t>(operands), 0);
      mixed.back() = o;  // the last operand off the others' phase: all scalar
      out.push_back(mixed);
    }
  return out;
}

std::string offsets_str(const std::vector<int64_t>& o) {
  std::string s;
  for (int64_t v : o) s += (s.empty() ? "" : ",") + std::to_string(v);
  return s;
}

template <typename T>
void expect_same(const std::vector<T>& got, const std::vector<T>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) == 0) continue;
    if constexpr (std::is_same_v<T, float>)
      if (std::isnan(got[i]) && std::isnan(want[i])) continue;
    ADD_FAILURE() << what << "[" << i << "] differs";
    return;
  }
}

uint16_t to16(float f, DType dt) { return dt == DType::BF16 ? cpu::f32_to_bf16(f) : cpu::f32_to_f16(f); }
float from16(uint16_t h, DType dt) { return dt == DType::BF16 ? cpu::bf16_to_f32(h) : cpu::f16_to_f32(h); }
std::vector<uint16_t> to16(const std::vector<float>& v, DType dt) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = to16(v[i], dt);
  return out;
}

DP_GPU_TEST_F(CudaVecPassGpu, F32ReluAddScaleDivideAtEveryOffset) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  for (int64_t n : kLengths)
    for (const auto& o : offset_sets(4, 3)) {
      SCOPED_TRACE(testing::Message() << "n " << n << " offsets " << offsets_str(o));
      auto a = floats(n), b = floats(n, 3.0f);
      a[0] = -0.0f;
      if (n > 2) a[2] = std::numeric_limits<float>::quiet_NaN();
      std::vector<float> relu(n), drelu(n), sum(n), scaled(n), quot = b;
      cpu::relu_forward(relu.data(), a.data(), n);
      cpu::relu_backward(drelu.data(), b.data(), relu.data(), n);
      cpu::add(sum.data(), a.data(), b.data(), n);
      cpu::scale(scaled.data(), b.data(), 0.37f, n);
      cpu::divide(DType::F32, quot.data(), n, 3);

      auto x = window(a, o[0]), dy = window(b, o[1]), y = window(std::vector<float>(n), o[2]);
      CHECK_CUDA(relu_forward(y.get(), x.get(), n, s()));
      expect_same(y.download(), relu, "relu");
      auto dx = window(std::vector<float>(n), o[0]);
      CHECK_CUDA(relu_backward(dx.get(), dy.get(), y.get(), n, s()));
      expect_same(dx.download(), drelu, "relu backward");
      CHECK_CUDA(add(y.get(), x.get(), dy.get(), n, s()));
      expect_same(y.download(), sum, "add");
      CHECK_CUDA(scale(y.get(), dy.get(), 0.37f, n, s()));
      expect_same(y.download(), scaled, "scale");
      CHECK_CUDA(divide(dy.get(), n, 3, s()));
      expect_same(dy.download(), quot, "divide");
      EXPECT_TRUE(y.outside_intact() && dx.outside_intact() && dy.outside_intact() && x.outside_intact());
    }
}

DP_GPU_TEST_F(CudaVecPassGpu, SixteenBitReluAndAddAtEveryOffset) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  for (DType dt : {DType::BF16, DType::F16})
    for (int64_t n : kLengths)
      for (const auto& o : offset_sets(8, 3)) {
        SCOPED_TRACE(testing::Message() << dtype_name(dt) << " n " << n << " offsets " << offsets_str(o));
        const auto a = to16(floats(n), dt), b = to16(floats(n, 3.0f), dt);
        std::vector<uint16_t> relu(n), drelu(n), sum(n);
        for (int64_t i = 0; i < n; ++i) {
          relu[i] = from16(a[i], dt) < 0.0f ? to16(0.0f, dt) : a[i];
          drelu[i] = from16(relu[i], dt) > 0.0f ? b[i] : to16(0.0f, dt);
          sum[i] = to16(from16(a[i], dt) + from16(b[i], dt), dt);
        }
        auto x = window(a, o[0]), dy = window(b, o[1]), y = window(std::vector<uint16_t>(n), o[2]);
        CHECK_CUDA(relu_forward(dt, y.get(), x.get(), n, s()));
        expect_same(y.download(), relu, "relu");
        auto dx = window(std::vector<uint16_t>(n), o[1]);
        CHECK_CUDA(relu_backward(dt, dx.get(), dy.get(), y.get(), n, s()));
        expect_same(dx.download(), drelu, "relu backward");
        CHECK_CUDA(add(dt, y.get(), x.get(), dy.get(), n, s()));
        expect_same(y.download(), sum, "add");
        CHECK_CUDA(add_inplace(dt, x.get(), dy.get(), n, s()));
        expect_same(x.download(), sum, "add_inplace");
        EXPECT_TRUE(y.outside_intact() && dx.outside_intact() && x.outside_intact());
      }
}

DP_GPU_TEST_F(CudaVecPassGpu, BiasAddAtEveryOffset) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  struct Case { int64_t outer, channels, inner; };
  for (DType dt : {DType::F32, DType::BF16})
    for (Case c : {Case{3, 5, 1}, Case{2, 7, 9}, Case{1, 1, 3}})
      for (int64_t off = 0; off < (dt == DType::F32 ? 4 : 8); ++off) {
        SCOPED_TRACE(testing::Message() << dtype_name(dt) << " " << c.outer << "x" << c.channels << "x" << c.inner
                                        << " offset " << off);
        const int64_t n = c.outer * c.channels * c.inner;
        const auto y0 = floats(n), bias = floats(c.channels);
        if (dt == DType::F32) {
          std::vector<float> want = y0;
          for (int64_t i = 0; i < n; ++i) want[i] += bias[(i / c.inner) % c.channels];
          auto y = window(y0, off);
          auto b = window(bias, (off + 1) % 4);  // the bias is read per element: any alignment
          CHECK_CUDA(bias_add(y.get(), b.get(), c.outer, c.channels, c.inner, s()));
          expect_same(y.download(), want, "bias_add");
          EXPECT_TRUE(y.outside_intact());
        } else {
          const auto y16 = to16(y0, dt), b16 = to16(bias, dt);
          std::vector<uint16_t> want(n);
          for (int64_t i = 0; i < n; ++i)
            want[i] = to16(from16(y16[i], dt) + from16(b16[(i / c.inner) % c.channels], dt), dt);
          auto y = window(y16, off);
          auto b = window(b16, 3);
          CHECK_CUDA(bias_add(dt, y.get(), b.get(), c.outer, c.channels, c.inner, s()));
          expect_same(y.download(), want, "bias_add 16");
          EXPECT_TRUE(y.outside_intact());
        }
      }
}

DP_GPU_TEST_F(CudaVecPassGpu, CastsAndUnscaleAtEveryOffset) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  for (int64_t n : kLengths)
    for (const auto& o : offset_sets(4, 2)) {
      SCOPED_TRACE(testing::Message() << "n " << n << " offsets " << offsets_str(o));
      const auto f = floats(n, 100.0f);
      std::vector<uint16_t> bf(n), hf(n);
      std::vector<float> wide_bf(n), wide_hf(n);
      for (int64_t i = 0; i < n; ++i) {
        bf[i] = cpu::f32_to_bf16(f[i]), hf[i] = cpu::f32_to_f16(f[i]);
        wide_bf[i] = cpu::bf16_to_f32(bf[i]), wide_hf[i] = cpu::f16_to_f32(hf[i]);
      }
      auto x = window(f, o[0]);
      auto h = window(std::vector<uint16_t>(n), o[1]);
      auto w = window(std::vector<float>(n), o[0]);
      CHECK_CUDA(f32_to_bf16(h.get(), x.get(), n, s()));
      expect_same(h.download(), bf, "f32_to_bf16");
      CHECK_CUDA(bf16_to_f32(w.get(), h.get(), n, s()));
      expect_same(w.download(), wide_bf, "bf16_to_f32");
      CHECK_CUDA(f32_to_f16(h.get(), x.get(), n, s()));
      expect_same(h.download(), hf, "f32_to_f16");
      CHECK_CUDA(f16_to_f32(w.get(), h.get(), n, s()));
      expect_same(w.download(), wide_hf, "f16_to_f32");
      EXPECT_TRUE(h.outside_intact() && w.outside_intact() && x.outside_intact());

      // Unscale with the found-inf flag: clean, then one inf in the head, the body or the tail.
      for (int64_t bad_at : {int64_t{-1}, int64_t{0}, n / 2, n - 1}) {
        SCOPED_TRACE(testing::Message() << "inf at " << bad_at);
        std::vector<uint16_t> g16 = hf;
        std::vector<float> g32 = wide_hf;
        if (bad_at >= 0) g16[bad_at] = 0x7C00u, g32[bad_at] = std::numeric_limits<float>::infinity();
        std::vector<float> want(n);
        for (int64_t i = 0; i < n; ++i) want[i] = cpu::f16_to_f32(g16[i]) * 0.125f;
        auto g = window(g16, o[1]);
        auto y = window(std::vector<float>(n), o[0]);
        test::Guarded<float> flag(std::vector<float>{0.0f}, s());
        CHECK_CUDA(f16_to_f32(y.get(), g.get(), n, s()));
        CHECK_CUDA(unscale_f32(y.get(), n, 0.125f, flag.get(), s()));
        expect_same(y.download(), want, "f16_to_f32 then unscale_f32");
        EXPECT_EQ(flag.download()[0], bad_at >= 0 ? 1.0f : 0.0f);
        auto g2 = window(g32, o[1]);
        flag.upload({0.0f});
        CHECK_CUDA(unscale_f32(g2.get(), n, 0.125f, flag.get(), s()));
        expect_same(g2.download(), want, "unscale_f32");
        EXPECT_EQ(flag.download()[0], bad_at >= 0 ? 1.0f : 0.0f);
        EXPECT_TRUE(y.outside_intact() && g2.outside_intact() && flag.guards_intact());
      }
    }
}

DP_GPU_TEST_F(CudaVecPassGpu, WideningAndSixteenBitAccumulationAtEveryOffset) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  for (DType dt : {DType::BF16, DType::F16})
    for (int64_t n : kLengths)
      for (const auto& o : offset_sets(4, 2)) {
        SCOPED_TRACE(testing::Message() << dtype_name(dt) << " n " << n << " offsets " << offsets_str(o));
        const bool bf = dt == DType::BF16;
        const auto y0 = floats(n);
        const auto a = to16(floats(n), dt), b = to16(floats(n), dt);
        std::vector<float> acc(n);
        std::vector<uint16_t> sum(n);
        for (int64_t i = 0; i < n; ++i) {
          acc[i] = y0[i] + from16(a[i], dt);
          sum[i] = to16(from16(a[i], dt) + from16(b[i], dt), dt);
        }
        auto y = window(y0, o[0]);
        auto x = window(a, o[1]), src = window(b, (o[1] + o[0]) % 8);
        CHECK_CUDA(widen_accumulate(y.get(), x.get(), n, bf, s()));
        expect_same(y.download(), acc, "widen_accumulate");
        CHECK_CUDA(add_inplace_16(x.get(), src.get(), n, bf, s()));
        expect_same(x.download(), sum, "add_inplace_16");
        EXPECT_TRUE(y.outside_intact() && x.outside_intact());
      }
}

// The optimizers over arena-like slots: every operand (p, g, state, 16-bit copy) at the same
// element offset, as the arenas' shared layout gives them; plus a mismatched gradient.
DP_GPU_TEST_F(CudaVecPassGpu, OptimizersAndTheirSixteenBitCopyAtEveryOffset) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  SgdScalars sgd;
  sgd.neg_lr = -0.1f, sgd.weight_decay = 5e-4f, sgd.momentum = 0.9f, sgd.first_step = false;
  AdamWScalars adam;
  adam.apply_decay = true, adam.decay = 1.0f - 1e-5f, adam.neg_step_size = -1e-3f, adam.bias_correction2_sqrt = 0.3f;
  for (int64_t n : kLengths)
    for (const auto& o : offset_sets(4, 2))
      for (int copy = 0; copy < 3; ++copy) {  // none, bf16, f16
        SCOPED_TRACE(testing::Message() << "n " << n << " offsets " << offsets_str(o) << " copy " << copy);
        const int64_t off = o[0], goff = o[1];
        const auto p0 = floats(n), g = floats(n, 1e-2f), buf0 = floats(n, 1e-2f), m0 = floats(n, 1e-3f);
        std::vector<float> v0 = floats(n, 1e-5f);
        for (auto& v : v0) v = std::fabs(v);
        std::vector<float> p_sgd = p0, buf = buf0, p_adam = p0, m = m0, v = v0;
        cpu::sgd_step(p_sgd.data(), g.data(), buf.data(), n, sgd);
        cpu::adamw_step(p_adam.data(), g.data(), m.data(), v.data(), n, adam);

        auto pw = window(p0, off), gw = window(g, goff), bw = window(buf0, off);
        auto lp = window(std::vector<uint16_t>(n), off);
        const ParamCopy16 c{copy == 0 ? nullptr : lp.get(), copy == 1};
        CHECK_CUDA(sgd_step(pw.get(), gw.get(), bw.get(), n, sgd, s(), c));
        expect_same(pw.download(), p_sgd, "sgd p");
        expect_same(bw.download(), buf, "sgd buf");
        // The copy: what the cast kernel writes from the updated parameters.
        auto cast = window(std::vector<uint16_t>(n), off);
        if (copy != 0) {
          CHECK_CUDA((copy == 1 ? f32_to_bf16 : f32_to_f16)(cast.get(), pw.get(), n, s()));
          expect_same(lp.download(), cast.download(), "sgd copy");
        }
        EXPECT_TRUE(pw.outside_intact() && bw.outside_intact() && lp.outside_intact());

        auto pa = window(p0, off), mw = window(m0, off), vw = window(v0, off);
        CHECK_CUDA(adamw_step(pa.get(), gw.get(), mw.get(), vw.get(), n, adam, s(), c));
        expect_same(pa.download(), p_adam, "adamw p");
        expect_same(mw.download(), m, "adamw m");
        expect_same(vw.download(), v, "adamw v");
        if (copy != 0) {
          CHECK_CUDA((copy == 1 ? f32_to_bf16 : f32_to_f16)(cast.get(), pa.get(), n, s()));
          expect_same(lp.download(), cast.download(), "adamw copy");
        }
        EXPECT_TRUE(pa.outside_intact() && mw.outside_intact() && vw.outside_intact() && lp.outside_intact());
      }
}

}  // namespace
}  // namespace dp::kernels::cuda
#else
TEST(CudaVecPass, NeedsACudaBuild) { GTEST_SKIP() << "built without CUDA"; }
#endif
