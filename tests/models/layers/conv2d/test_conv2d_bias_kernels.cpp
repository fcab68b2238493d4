// Conv2d's bias on the GPU (models/layers/conv2d/conv2d_cuda.cpp): kernels::cuda::bias_add and
// bias_grad over conv_bias_view's (outer, channels, inner), in NCHW and in NHWC (channels last),
// against the conv's CPU twin (kernels::cpu::conv2d_forward / conv2d_backward) on a depthwise 1x1
// convolution with unit weights: its output is exactly x + bias, its bias gradient the channel
// sums of dy. Odd shapes, an empty batch; f32, bf16 and f16; guard regions around every device
// array. The forward is bit for bit (one addition, rounded once); the gradient within the f32
// summation's rounding (the twin sums in f64) and one final rounding to the dtype. Runs on the
// CUDA emulator in CI (ctest -L emu); skips in the real build without a GPU.
#include <gtest/gtest.h>

#include "models/layers/conv2d/bias_layout.h"

namespace dp::models {
namespace {

TEST(ConvBiasView, NchwIsSamplesChannelsPixelsNhwcIsPixelsChannelsOne) {
  const ConvBiasView nchw = conv_bias_view(3, 5, 7 * 9, false), nhwc = conv_bias_view(3, 5, 7 * 9, true);
  EXPECT_EQ(nchw.outer, 3);
  EXPECT_EQ(nchw.channels, 5);
  EXPECT_EQ(nchw.inner, 63);
  EXPECT_EQ(nhwc.outer, 3 * 63);
  EXPECT_EQ(nhwc.channels, 5);
  EXPECT_EQ(nhwc.inner, 1);
}

}  // namespace
}  // namespace dp::models

#ifdef DPTRAIN_HAVE_CUDA
#include <cmath>
#include <vector>

#include "base/dtype.h"
#include "base/half.h"
#include "kernels/cuda/elementwise.h"
#include "models/layers/conv2d/conv2d_ref.h"
#include "tests/kernels/cuda_test_util.h"

namespace dp::models {
namespace {

using kernels::cuda::test::Guarded;
namespace cpu = kernels::cpu;

// Conv output (n, k, oh, ow) in logical NCHW order.
struct OutShape {
  int64_t n, k, oh, ow;
  int64_t numel() const { return n * k * oh * ow; }
  // Memory index of logical element i in the layout.
  int64_t at(int64_t i, bool nhwc) const {
    if (!nhwc) return i;
    const int64_t w = i % ow, h = (i / ow) % oh, c = (i / (ow * oh)) % k, s = i / (ow * oh * k);
    return ((s * oh + h) * ow + w) * k + c;
  }
  // The twin's depthwise 1x1 convolution with this output: input (n, k, oh, ow), groups k.
  cpu::Conv2dDims dims() const { return {n, k, oh, ow, k, 1, 1, 0, k, oh, ow}; }
};

// 1x1; odd sizes; channels above and below the block size; more pixels than threads; no samples.
const OutShape kShapes[] = {{1, 1, 1, 1}, {3, 5, 7, 9}, {2, 17, 5, 3}, {4, 64, 7, 7}, {5, 3, 13, 11}, {2, 300, 3, 1},
                            {0, 4, 3, 3}};

uint16_t to16(float f, DType dt) { return dt == DType::BF16 ? cpu::f32_to_bf16(f) : cpu::f32_to_f16(f); }
float from16(uint16_t h, DType dt) { return dt == DType::BF16 ? cpu::bf16_to_f32(h) : cpu::f16_to_f32(h); }
float round_to(float f, DType dt) { return dt == DType::F32 ? f : from16(to16(f, dt), dt); }

// Logical (NCHW-ordered) values v in the layout's memory order.
std::vector<float> to_layout(const std::vector<float>& v, const OutShape& o, bool nhwc) {
  std::vector<float> m(v.size());
  for (int64_t i = 0; i < o.numel(); ++i) m[o.at(i, nhwc)] = v[i];
  return m;
}

// dt's device array holding the (already dt-representable) values, and its values read back.
struct DeviceValues {
  DType dt;
  Guarded<float> f32;
  Guarded<uint16_t> h16;
  DeviceValues(const std::vector<float>& v, DType d, cudaStream_t s)
      : dt(d), f32(d == DType::F32 ? v.size() : 0, s), h16(d == DType::F32 ? 0 : v.size(), s) {
    if (dt == DType::F32) {
      f32.upload(v);
    } else {
      std::vector<uint16_t> h(v.size());
      for (size_t i = 0; i < v.size(); ++i) h[i] = to16(v[i], dt);
      h16.upload(h);
    }
  }
  void* get() { return dt == DType::F32 ? static_cast<void*>(f32.get()) : static_cast<void*>(h16.get()); }
  std::vector<float> download() {
    if (dt == DType::F32) return f32.download();
    std::vector<float> out;
    for (uint16_t h : h16.download()) out.push_back(from16(h, dt));
    return out;
  }
  bool guards_intact() { return dt == DType::F32 ? f32.guards_intact() : h16.guards_intact(); }
};

class CudaConvBiasGpu : public kernels::cuda::test::GpuTest {
 protected:
  std::vector<float> random(int64_t n, DType dt) {
    auto v = kernels::cuda::test::normal_floats(static_cast<size_t>(n), gen_);
    for (auto& x : v) x = round_to(x, dt);
    return v;
  }
};

DP_GPU_TEST_F(CudaConvBiasGpu, BiasAddInBothLayoutsEqualsTheConvTwinBitForBit) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  for (DType dt : {DType::F32, DType::BF16, DType::F16})
    for (bool nhwc : {false, true})
      for (const OutShape& o : kShapes) {
        SCOPED_TRACE(testing::Message() << dtype_name(dt) << (nhwc ? " NHWC " : " NCHW ") << o.n << "x" << o.k << "x"
                                        << o.oh << "x" << o.ow);
        const auto x = random(o.numel(), dt), b = random(o.k, dt);
        const std::vector<float> w(o.k, 1.0f);
        std::vector<float> want(o.numel());
        cpu::conv2d_forward(want.data(), x.data(), w.data(), b.data(), o.dims());  // exactly x + b, in f32
        for (auto& v : want) v = round_to(v, dt);

        DeviceValues y(to_layout(x, o, nhwc), dt, s()), bias(b, dt, s());
        const ConvBiasView v = conv_bias_view(o.n, o.k, o.oh * o.ow, nhwc);
        CHECK_CUDA(kernels::cuda::bias_add(dt, y.get(), bias.get(), v.outer, v.channels, v.inner, s()));
        const auto got = y.download();
        int64_t bad = 0;
        for (int64_t i = 0; i < o.numel(); ++i)
          if (got[o.at(i, nhwc)] != want[i] && bad++ < 3)
            ADD_FAILURE() << "element " << i << ": " << got[o.at(i, nhwc)] << ", the twin's " << want[i];
        EXPECT_EQ(bad, 0);
        EXPECT_TRUE(y.guards_intact());
      }
}

DP_GPU_TEST_F(CudaConvBiasGpu, BiasGradInBothLayoutsAccumulatesTheConvTwinsChannelSums) {
  SCOPED_TRACE(testing::Message() << "seed " << seed_);
  for (DType dt : {DType::F32, DType::BF16, DType::F16})
    for (bool nhwc : {false, true})
      for (const OutShape& o : kShapes) {
        SCOPED_TRACE(testing::Message() << dtype_name(dt) << (nhwc ? " NHWC " : " NCHW ") << o.n << "x" << o.k << "x"
                                        << o.oh << "x" << o.ow);
        const auto dy = random(o.numel(), dt), x = random(o.numel(), DType::F32), db0 = random(o.k, dt);
        const std::vector<float> w(o.k, 1.0f);
        // The twin accumulates into db (+=), as the layer's parameter gradients do.
        std::vector<float> want = db0, dw(o.k, 0.0f);
        cpu::conv2d_backward<float>(nullptr, dw.data(), want.data(), dy.data(), x.data(), w.data(), o.dims());
        std::vector<double> mag(o.k);
        for (int64_t c = 0; c < o.k; ++c) mag[c] = std::fabs(db0[c]);
        for (int64_t i = 0; i < o.numel(); ++i) mag[(i / (o.oh * o.ow)) % o.k] += std::fabs(dy[i]);

        DeviceValues dyd(to_layout(dy, o, nhwc), dt, s()), db(db0, dt, s());
        const ConvBiasView v = conv_bias_view(o.n, o.k, o.oh * o.ow, nhwc);
        CHECK_CUDA(kernels::cuda::bias_grad(dt, db.get(), dyd.get(), v.outer, v.channels, v.inner, s()));
        const auto got = db.download();
        // f32: the sums' rounding; 16-bit: one rounding of the result (2^-8 bf16, 2^-11 f16).
        const double rel = dt == DType::F32 ? 1e-5 : dt == DType::BF16 ? 8e-3 : 1e-3;
        for (int64_t c = 0; c < o.k; ++c)
          ASSERT_NEAR(got[c], want[c], rel * mag[c] + 1e-30) << "channel " << c;
        EXPECT_TRUE(db.guards_intact());
      }
}

}  // namespace
}  // namespace dp::models
#endif  // DPTRAIN_HAVE_CUDA
