// Every layer case on the oneDNN backend (train.cpu_backend = "onednn") against its reference
// twin: the f32 oneDNN path (NCHW, and NHWC as the graph stores activations under that backend,
// and with a ReLU fused into the layer where it can take one) compared with the f64 reference
// kernels on the same values: forward output, input gradients, parameter gradients and running
// statistics, within the f32 tolerance the layer tests use (test_layer_precision.cpp); the layers
// with linear products on each GEMM library (train.cpu_gemm; MKL's cases skip without MKL). Then:
// the oneDNN path is bitwise repeatable with the same thread count.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/layout.h"
#include "models/layers/conv2d/onednn_conv_choice.h"
#include "tests/mkl_test.h"
#include "tests/models/layer_harness.h"

namespace dp::test {
namespace {

constexpr double kTol = 1e-5;

struct OnednnCase {
  LayerCase layer;
  bool nhwc = false;   // 4-D activations channels last
  bool relu = false;   // a ReLU fused into the layer
  CpuGemm gemm = CpuGemm::Auto;  // the linear products' library (train.cpu_gemm)
};

void PrintTo(const OnednnCase& c, std::ostream* os) {
  *os << c.layer.name << (c.nhwc ? " nhwc" : " nchw") << (c.relu ? " +relu" : "") << " gemm "
      << enum_name(c.gemm);
}

// A 4-D f32 tensor NCHW -> NHWC (to_nhwc) or back (same logical shape); others as they are.
Tensor relayout(const Tensor& t, bool to_nhwc) {
  if (t.ndim() != 4) return t.clone();
  Tensor out = Tensor::zeros(t.shape(), t.dtype());
  const int64_t N = t.dim(0), C = t.dim(1), HW = t.dim(2) * t.dim(3);
  if (to_nhwc) kernels::cpu::nchw_to_nhwc(out.data<float>(), t.data<float>(), N, C, HW);
  else kernels::cpu::nhwc_to_nchw(out.data<float>(), t.data<float>(), N, C, HW);
  return out;
}

// relu(y) in place (f64), and dy masked by it: what a relu after the layer does.
void apply_relu(Tensor& y, Tensor& dy) {
  for (int64_t i = 0; i < y.numel(); ++i) {
    if (get(y, i) < 0) set(y, i, 0.0);
    if (!(get(y, i) > 0)) set(dy, i, 0.0);
  }
}

class OnednnLayers : public ::testing::TestWithParam<OnednnCase> {};

TEST_P(OnednnLayers, MatchReferenceTwin) {
  if (GetParam().gemm == CpuGemm::Mkl) DP_SKIP_WITHOUT_MKL();
  const LayerCase& c = GetParam().layer;
  const bool nhwc = GetParam().nhwc, relu = GetParam().relu;
  TestLayer ref = make_test_layer(c, DType::F64, 7);
  TestLayer dnn = make_test_layer(c, DType::F32, 7);
  for (auto& p : ref.params) p.copy_from(cast(cast(p, DType::F32), DType::F64));  // values f32 can hold
  for (auto& b : ref.buffers) b.copy_from(cast(cast(b, DType::F32), b.dtype()));
  dnn.copy_state_from(ref);
  if (relu) dnn.layer->set_epilogue(Epilogue::Relu);
  Rng rng(21, 3);
  std::vector<Tensor> x64 = ref.random_inputs(c.batch, rng), x32;
  for (auto& x : x64) x.copy_from(cast(cast(x, DType::F32), DType::F64));
  auto in_layout = [&](const Tensor& t) { return nhwc ? relayout(t, true) : t.clone(); };
  auto back = [&](const Tensor& t) { return nhwc ? relayout(t, false) : t.clone(); };
  for (const auto& x : x64) x32.push_back(in_layout(cast(x, DType::F32)));
  StepContext ctx = case_ctx(c), dctx = ctx;
  dctx.cpu_backend = CpuBackend::OneDnn;
  dctx.channels_last = nhwc;
  dctx.cpu_gemm = GetParam().gemm;

  Tensor y64 = ref.forward(ctx, x64);
  Tensor dy64 = random_normal(y64.shape(), DType::F64, rng);
  dy64.copy_from(cast(cast(dy64, DType::F32), DType::F64));
  Tensor y32 = dnn.forward(dctx, x32);
  std::vector<Tensor> dx32 = dnn.backward(dctx, x32, y32, in_layout(cast(dy64, DType::F32)));
  if (relu) apply_relu(y64, dy64);
  std::vector<Tensor> dx64 = ref.backward(ctx, x64, y64, dy64);

  EXPECT_LT(normalised_error(back(y32), y64), kTol) << "output";
  for (size_t k = 0; k < dx64.size(); ++k) {
    if (dx64[k].defined()) {
      EXPECT_LT(normalised_error(back(dx32[k]), dx64[k]), kTol) << "input gradient " << k;
    }
  }
  for (size_t j = 0; j < ref.grads.size(); ++j)
    EXPECT_LT(normalised_error(dnn.grads[j], ref.grads[j]), kTol) << "parameter gradient " << j;
  for (size_t j = 0; j < ref.buffers.size(); ++j) {
    if (is_floating(ref.buffers[j].dtype()))
      EXPECT_LT(normalised_error(dnn.buffers[j], ref.buffers[j]), kTol) << "buffer " << j;
    else
      EXPECT_EQ(std::memcmp(dnn.buffers[j].raw(), ref.buffers[j].raw(), ref.buffers[j].nbytes()), 0) << "buffer " << j;
  }
  // Able to fail: a layer with an output that is all zeros would compare equal to anything zero.
  double mag = 0;
  for (int64_t i = 0; i < y64.numel(); ++i) mag = std::max(mag, std::abs(get(y64, i)));
  EXPECT_GT(mag, 1e-3);
}

// Convolutions that train.cpu_conv_algorithm = "auto" (StepContext's default) runs on oneDNN's
// Winograd algorithm (onednn_winograd_fits): 3x3, stride 1, >= 64 channels in and out.
std::vector<LayerCase> winograd_cases() {
  using A = std::map<std::string, ArgValue>;
  auto I = [](int64_t v) { return ArgValue{v}; };
  return {
      {"conv_wino", "conv2d", A{{"out_channels", I(64)}, {"kernel", I(3)}, {"padding", I(1)}}, {{64, 6, 6}}, 2},
      {"conv_wino_nobias", "conv2d", A{{"out_channels", I(80)}, {"kernel", I(3)}, {"padding", I(1)}, {"bias", ArgValue{false}}},
       {{96, 5, 7}}, 3},
      {"conv_wino_pad0", "conv2d", A{{"out_channels", I(64)}, {"kernel", I(3)}}, {{64, 8, 8}}, 2},
  };
}

std::vector<OnednnCase> onednn_cases() {
  std::vector<OnednnCase> out;
  std::vector<LayerCase> all = layer_cases();
  for (const auto& w : winograd_cases()) all.push_back(w);
  for (const auto& c : all) {
    const bool folds_relu = make_layer(c.type, c.args)->applicable_epilogues(FusionPath::CpuOnednn).has(Epilogue::Relu);
    // Dropout draws its mask per stored element: NHWC drops other elements than the NCHW twin.
    // The layers with linear products: on each GEMM library (auto is one of the others; MKL skipped
    // without it).
    const bool gemms = c.type == "linear" || c.type == "causal_self_attention";
    for (bool nhwc : {false, true}) {
      if (nhwc && c.type == "dropout" && c.training) continue;
      for (CpuGemm g : {CpuGemm::Auto, CpuGemm::Onednn, CpuGemm::Openblas, CpuGemm::Mkl}) {
        if (g != CpuGemm::Auto && !gemms) continue;
        out.push_back({c, nhwc, false, g});
        if (folds_relu) out.push_back({c, nhwc, true, g});
      }
    }
  }
  return out;
}

std::string case_name(const ::testing::TestParamInfo<OnednnCase>& info) {
  const std::string gemm = info.param.gemm == CpuGemm::Auto ? "" : "_" + std::string(enum_name(info.param.gemm));
  return info.param.layer.name + (info.param.nhwc ? "_nhwc" : "_nchw") + (info.param.relu ? "_relu" : "") + gemm;
}

INSTANTIATE_TEST_SUITE_P(Layers, OnednnLayers, ::testing::ValuesIn(onednn_cases()), case_name);

// Bitwise repeatable on the oneDNN path with the same thread count (2), NHWC, sizes above every
// threading threshold; not required across thread counts (the reference path is).
std::vector<Tensor> run_once(const LayerCase& c, bool relu, CpuConvAlgorithm algo = CpuConvAlgorithm::Auto,
                             CpuGemm gemm = CpuGemm::Auto) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(2);
  TestLayer t = make_test_layer(c, DType::F32, 8);
  if (relu) t.layer->set_epilogue(Epilogue::Relu);
  Rng rng(99, 0);
  std::vector<Tensor> x;
  for (const auto& xi : t.random_inputs(c.batch, rng)) x.push_back(relayout(xi, true));
  StepContext ctx = case_ctx(c);
  ctx.cpu_backend = CpuBackend::OneDnn;
  ctx.channels_last = true;
  ctx.cpu_conv_algorithm = algo;
  ctx.cpu_gemm = gemm;
  std::vector<Tensor> r{t.forward(ctx, x)};
  Tensor dy = random_normal(r[0].shape(), DType::F32, rng);
  for (auto& d : t.backward(ctx, x, r[0], dy)) r.push_back(d);
  for (auto& g : t.grads) r.push_back(g.clone());
  for (auto& b : t.buffers) r.push_back(b.clone());
  omp_set_num_threads(saved);
  return r;
}

TEST(OnednnDeterminism, BitwiseRepeatableWithTheSameThreadCount) {
  using A = std::map<std::string, ArgValue>;
  auto I = [](int64_t v) { return ArgValue{v}; };
  const std::vector<std::pair<LayerCase, bool>> cases = {
      {{"conv_k3", "conv2d", A{{"out_channels", I(32)}, {"kernel", I(3)}, {"padding", I(1)}}, {{16, 14, 14}}, 32}, false},
      {{"conv_s2_g2", "conv2d", A{{"out_channels", I(16)}, {"kernel", I(3)}, {"stride", I(2)}, {"groups", I(2)}},
        {{8, 15, 15}}, 16}, false},
      {{"bn_train", "batchnorm2d", A{}, {{32, 14, 14}}, 32, true}, true},
      {{"maxpool", "maxpool2d", A{{"kernel", I(3)}, {"stride", I(2)}, {"padding", I(1)}}, {{16, 16, 16}}, 16}, false},
      {{"linear", "linear", A{{"out_features", I(128)}}, {{700}}, 64}, true},
      {{"conv_wino", "conv2d", A{{"out_channels", I(64)}, {"kernel", I(3)}, {"padding", I(1)}}, {{64, 12, 12}}, 8},
       false},
  };
  for (const auto& [c, relu] : cases)
    for (CpuGemm g : {CpuGemm::Onednn, CpuGemm::Openblas, CpuGemm::Mkl}) {
      if (g != CpuGemm::Onednn && c.type != "linear") continue;
      if (g == CpuGemm::Mkl && !process_mkl().loaded) continue;  // MklGemm's tests say it is skipped
      std::vector<Tensor> a = run_once(c, relu, CpuConvAlgorithm::Auto, g), b = run_once(c, relu, CpuConvAlgorithm::Auto, g);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i)
        EXPECT_EQ(std::memcmp(a[i].raw(), b[i].raw(), a[i].nbytes()), 0)
            << c.name << " (gemm " << enum_name(g) << "): tensor " << i << " differs";
    }
}

// "auto" takes Winograd where it fits: its bits differ from the direct algorithm's (while both
// match the reference above); where it does not fit, auto is the direct algorithm bit for bit.
// Winograd needs oneDNN on AVX-512: without it (an AVX2-only CPU, or ONEDNN_MAX_CPU_ISA=AVX2) auto
// is the direct algorithm everywhere, bit for bit.
TEST(OnednnConvAlgorithm, AutoTakesWinogradOnlyWhereItFits) {
  using A = std::map<std::string, ArgValue>;
  auto I = [](int64_t v) { return ArgValue{v}; };
  const LayerCase wino = winograd_cases()[0];
  const LayerCase narrow{"conv_k3", "conv2d", A{{"out_channels", I(32)}, {"kernel", I(3)}, {"padding", I(1)}},
                         {{32, 6, 6}}, 2};
  const bool avx512 = kernels::cpu::onednn_has_avx512_core();
  std::printf("oneDNN's ISA: %s: Winograd %s\n", kernels::cpu::onednn_isa_name().c_str(),
              avx512 ? "where it fits" : "nowhere (it needs AVX-512)");
  for (const auto& [c, differs] : {std::pair{wino, avx512}, std::pair{narrow, false}}) {
    std::vector<Tensor> a = run_once(c, false, CpuConvAlgorithm::Auto);
    std::vector<Tensor> d = run_once(c, false, CpuConvAlgorithm::Direct);
    ASSERT_EQ(a.size(), d.size());
    bool any = false;
    for (size_t i = 0; i < a.size(); ++i) {
      any = any || std::memcmp(a[i].raw(), d[i].raw(), a[i].nbytes()) != 0;
      EXPECT_LT(normalised_error(cast(a[i], DType::F64), cast(d[i], DType::F64)), kTol) << c.name << ": tensor " << i;
    }
    EXPECT_EQ(any, differs) << c.name;
  }
}

TEST(OnednnConvAlgorithm, WinogradFitsOnlyWide3x3Stride1) {
  using kernels::cpu::Conv2dDims;
  auto d = [](int64_t C, int64_t OC, int64_t K, int64_t stride, int64_t groups) {
    return Conv2dDims{8, C, 32, 32, OC, K, stride, 1, groups, 32, 32};
  };
  EXPECT_TRUE(models::onednn_winograd_fits(d(64, 64, 3, 1, 1), CpuConvAlgorithm::Auto, true));
  EXPECT_TRUE(models::onednn_winograd_fits(d(512, 256, 3, 1, 1), CpuConvAlgorithm::Auto, true));
  EXPECT_FALSE(models::onednn_winograd_fits(d(64, 64, 3, 1, 1), CpuConvAlgorithm::Direct, true));
  EXPECT_FALSE(models::onednn_winograd_fits(d(32, 64, 3, 1, 1), CpuConvAlgorithm::Auto, true));   // narrow input
  EXPECT_FALSE(models::onednn_winograd_fits(d(64, 48, 3, 1, 1), CpuConvAlgorithm::Auto, true));   // narrow output
  EXPECT_FALSE(models::onednn_winograd_fits(d(72, 64, 3, 1, 1), CpuConvAlgorithm::Auto, true));   // not 16k
  EXPECT_FALSE(models::onednn_winograd_fits(d(64, 64, 3, 2, 1), CpuConvAlgorithm::Auto, true));   // strided
  EXPECT_FALSE(models::onednn_winograd_fits(d(64, 64, 1, 1, 1), CpuConvAlgorithm::Auto, true));   // 1x1
  EXPECT_FALSE(models::onednn_winograd_fits(d(128, 128, 3, 1, 2), CpuConvAlgorithm::Auto, true)); // grouped
  EXPECT_FALSE(models::onednn_winograd_fits(d(64, 64, 3, 1, 1), CpuConvAlgorithm::Auto, false));  // no AVX-512
}

}  // namespace
}  // namespace dp::test
