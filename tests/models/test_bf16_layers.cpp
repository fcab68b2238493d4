// train.precision = "bf16" on the CPU (StepContext::cpu_matmul_bf16, kernels/cpu/onednn_matmul_bf16.h):
// the layers with linear products (linear, the attention's projections) against their f64
// reference twins on the same values. The products take bf16 operands, so the bound is bf16's
// (8 significant bits), and the error must be above f32's, or the products did not run in bf16.
// Linear also against a twin fed the bf16-rounded operands: within f32's bound, so the products
// accumulate and write f32 (torch.autocast's bf16 linear), and the bias and its gradient stay f32.
#include <gtest/gtest.h>

#include "base/half.h"
#include "kernels/cpu/bf16_isa.h"
#include "kernels/cpu/isa.h"
#include "tests/models/layer_harness.h"

namespace dp::test {
namespace {

constexpr double kF32Tol = 1e-5;
constexpr double kBf16Tol = 2e-2;  // a few times bf16's unit roundoff (2^-8 = 3.9e-3)

bool cpu_has_bf16() {
  return kernels::cpu::cpu_bf16_path(kernels::cpu::onednn_isa_name()) != kernels::cpu::CpuBf16Path::None;
}

// t's values rounded to bf16 (nearest even), in t's dtype.
Tensor bf16_rounded(const Tensor& t) {
  Tensor out = t.clone();
  for (int64_t i = 0; i < t.numel(); ++i)
    set(out, i, kernels::cpu::bf16_to_f32(kernels::cpu::f32_to_bf16(static_cast<float>(get(t, i)))));
  return out;
}

std::vector<LayerCase> bf16_cases() {
  std::vector<LayerCase> out;
  for (const LayerCase& c : layer_cases())
    if (c.type == "linear" || c.type == "causal_self_attention") out.push_back(c);
  return out;
}

class Bf16Layers : public ::testing::TestWithParam<LayerCase> {};

struct Result {
  Tensor y;
  std::vector<Tensor> dx, grads;
};

// The layer forward and backward on (x, dy) with its parameters set to `params` (f64 values).
Result run(const LayerCase& c, DType dtype, const StepContext& ctx, const std::vector<Tensor>& params,
        const std::vector<Tensor>& x, const Tensor& dy, bool relu) {
  TestLayer t = make_test_layer(c, dtype, 7);
  for (size_t j = 0; j < params.size(); ++j) t.params[j].copy_from(cast(params[j], dtype));
  if (relu) t.layer->set_epilogue(Epilogue::Relu);
  std::vector<Tensor> xt;
  for (const auto& xi : x) xt.push_back(cast(xi, dtype));
  Result r;
  r.y = t.forward(ctx, xt);
  r.dx = t.backward(ctx, xt, r.y, cast(dy, dtype));
  r.grads = t.grads;
  return r;
}

TEST_P(Bf16Layers, WithinBf16OfTheF64Twin) {
  if (!cpu_has_bf16()) GTEST_SKIP() << "no AVX-512-BF16 or AMX: " << kernels::cpu::onednn_isa_name();
  const LayerCase& c = GetParam();
  TestLayer ref = make_test_layer(c, DType::F64, 7);
  std::vector<Tensor> params;
  for (auto& p : ref.params) params.push_back(cast(cast(p, DType::F32), DType::F64));
  Rng rng(21, 3);
  std::vector<Tensor> x = ref.random_inputs(c.batch, rng);
  for (auto& xi : x) xi.copy_from(cast(cast(xi, DType::F32), DType::F64));
  StepContext ctx = case_ctx(c), bctx = ctx;
  bctx.cpu_backend = CpuBackend::OneDnn;
  bctx.cpu_matmul_bf16 = true;
  const Shape y_shape = ref.forward(ctx, x).shape();
  Tensor dy = cast(cast(random_normal(y_shape, DType::F64, rng), DType::F32), DType::F64);
  const Result want = run(c, DType::F64, ctx, params, x, dy, false);
  const Result got = run(c, DType::F32, bctx, params, x, dy, false);
  const double ey = normalised_error(got.y, want.y);
  EXPECT_LT(ey, kBf16Tol) << "output";
  EXPECT_GT(ey, kF32Tol) << "output: as close as f32, so the products did not run in bf16";
  for (size_t k = 0; k < want.dx.size(); ++k) {
    if (want.dx[k].defined()) {
      EXPECT_LT(normalised_error(got.dx[k], want.dx[k]), kBf16Tol) << "input gradient " << k;
    }
  }
  for (size_t j = 0; j < want.grads.size(); ++j)
    EXPECT_LT(normalised_error(got.grads[j], want.grads[j]), kBf16Tol) << "parameter gradient " << j;
}

INSTANTIATE_TEST_SUITE_P(Layers, Bf16Layers, ::testing::ValuesIn(bf16_cases()),
                         [](const ::testing::TestParamInfo<LayerCase>& i) { return i.param.name; });

// Linear's three products on bf16-rounded operands, accumulated in f32: the f64 twin fed the
// rounded x, W and dy agrees to f32's bound; the bias (forward) and its gradient (from the f32
// dy) are f32's. With and without a fused ReLU.
TEST(Bf16Linear, ProductsAreBf16OperandsWithF32Accumulation) {
  if (!cpu_has_bf16()) GTEST_SKIP() << "no AVX-512-BF16 or AMX: " << kernels::cpu::onednn_isa_name();
  using A = std::map<std::string, ArgValue>;
  const LayerCase c{"linear_wide", "linear", A{{"out_features", ArgValue{int64_t{48}}}}, {{6, 40}}, 3};
  for (bool relu : {false, true}) {
    TestLayer ref = make_test_layer(c, DType::F64, 7);
    std::vector<Tensor> params;
    for (auto& p : ref.params) params.push_back(cast(cast(p, DType::F32), DType::F64));
    Rng rng(5, 1);
    std::vector<Tensor> x = ref.random_inputs(c.batch, rng);
    for (auto& xi : x) xi.copy_from(cast(cast(xi, DType::F32), DType::F64));
    Tensor dy = cast(cast(random_normal(with_batch(c.batch, {6, 48}), DType::F64, rng), DType::F32), DType::F64);
    StepContext ctx = case_ctx(c), bctx = ctx;
    bctx.cpu_backend = CpuBackend::OneDnn;
    bctx.cpu_matmul_bf16 = true;
    const Result got = run(c, DType::F32, bctx, params, x, dy, relu);
    // The twin: W, x and dy rounded to bf16, the bias not; dy masked by the bf16 run's output.
    Tensor dy_masked = dy.clone();
    if (relu)
      for (int64_t i = 0; i < dy.numel(); ++i)
        if (!(get(got.y, i) > 0)) set(dy_masked, i, 0.0);
    std::vector<Tensor> rp = params;
    rp[0] = bf16_rounded(params[0]);
    const Result twin = run(c, DType::F64, ctx, rp, {bf16_rounded(x[0])}, bf16_rounded(dy_masked), false);
    const Result f32_bias = run(c, DType::F64, ctx, params, x, dy_masked, false);
    Tensor y_twin = twin.y.clone();
    if (relu)
      for (int64_t i = 0; i < y_twin.numel(); ++i) set(y_twin, i, std::max(0.0, get(y_twin, i)));
    EXPECT_LT(normalised_error(got.y, y_twin), kF32Tol) << "output, relu " << relu;
    EXPECT_LT(normalised_error(got.dx[0], twin.dx[0]), kF32Tol) << "input gradient, relu " << relu;
    EXPECT_LT(normalised_error(got.grads[0], twin.grads[0]), kF32Tol) << "weight gradient, relu " << relu;
    EXPECT_LT(normalised_error(got.grads[1], f32_bias.grads[1]), kF32Tol) << "bias gradient, relu " << relu;
    EXPECT_GT(normalised_error(got.grads[0], f32_bias.grads[0]), kF32Tol) << "weight gradient in bf16, relu " << relu;
  }
}

}  // namespace
}  // namespace dp::test
