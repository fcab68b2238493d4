// Layer::backward_needs is true of the code: for every layer case, on the CPU reference and the
// oneDNN paths (f32), a backward run after the tensors the layer declares it does not keep (its
// inputs, its output) were overwritten with NaN gives the same input and parameter gradients,
// bit for bit, as one run on the intact tensors. And the declarations' numbers for the shapes
// `dptrain memory` plans with.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "models/layers/attention/attention.h"
#include "tests/models/layer_harness.h"

namespace dp::test {
namespace {

void poison(const Tensor& t) {
  if (t.dtype() != DType::F32) return;  // ids stay valid: an embedding reads them by declaration
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = std::numeric_limits<float>::quiet_NaN();
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

struct Gradients {
  std::vector<Tensor> dx, dw;
};

Gradients run_backward(TestLayer& t, const StepContext& ctx, const std::vector<Tensor>& x, const Tensor& y,
                       const Tensor& dy) {
  Gradients g;
  for (const Tensor& d : t.backward(ctx, x, y, dy)) g.dx.push_back(d.defined() ? d.clone() : Tensor());
  for (const Tensor& w : t.grads) g.dw.push_back(w.clone());
  return g;
}

class BackwardNeedsPoison : public ::testing::TestWithParam<std::tuple<LayerCase, CpuBackend>> {};

TEST_P(BackwardNeedsPoison, WhatIsNotDeclaredIsNotRead) {
  const auto& [c, backend] = GetParam();
  TestLayer t = make_test_layer(c, DType::F32, 7);
  StepContext ctx = case_ctx(c);
  ctx.cpu_backend = backend;
  Rng rng(11, 3);
  const std::vector<Tensor> x = t.random_inputs(c.batch, rng);
  const Tensor y = t.forward(ctx, x);
  const Tensor dy = random_normal(y.shape(), DType::F32, rng);
  const Gradients want = run_backward(t, ctx, x, y, dy);

  NeedsQuery q{.dtype = DType::F32,
               .path = backend == CpuBackend::OneDnn ? MemoryPath::CpuOnednn : MemoryPath::CpuReference};
  for (const Tensor& xi : x) q.in.push_back(xi.shape());
  q.out = y.shape();
  const BackwardNeeds n = t.layer->backward_needs(q);
  if (!n.input)
    for (const Tensor& xi : x) poison(xi);
  if (!n.output) poison(y);
  const Gradients got = run_backward(t, ctx, x, y, dy);
  for (size_t i = 0; i < want.dx.size(); ++i) EXPECT_TRUE(same_bytes(got.dx[i], want.dx[i])) << "input gradient " << i;
  for (size_t i = 0; i < want.dw.size(); ++i) EXPECT_TRUE(same_bytes(got.dw[i], want.dw[i])) << "parameter gradient " << i;
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<LayerCase, CpuBackend>>& info) {
  return std::get<0>(info.param).name + (std::get<1>(info.param) == CpuBackend::OneDnn ? "_onednn" : "_reference");
}

INSTANTIATE_TEST_SUITE_P(Layers, BackwardNeedsPoison,
                         ::testing::Combine(::testing::ValuesIn(layer_cases()),
                                            ::testing::Values(CpuBackend::Reference, CpuBackend::OneDnn)),
                         case_name);

NeedsQuery query(Shape in, Shape out, DType dt, MemoryPath path, Epilogue e = Epilogue::None) {
  return NeedsQuery{.in = {std::move(in)}, .out = std::move(out), .dtype = dt, .path = path, .epilogue = e};
}

// Each kind of claim, as numbers.
TEST(BackwardNeeds, ReluKeepsItsOutputOnly) {
  auto l = make_layer("relu", {});
  l->setup({{3, 4, 4}});
  const BackwardNeeds n = l->backward_needs(query({2, 3, 4, 4}, {2, 3, 4, 4}, DType::BF16, MemoryPath::Cuda));
  EXPECT_FALSE(n.input);
  EXPECT_TRUE(n.output);
  EXPECT_EQ(n.kept_bytes + n.scratch_bytes, 0u);
}

TEST(BackwardNeeds, DropoutKeepsNothingAndAddWithAFoldedReluItsOutput) {
  auto d = make_layer("dropout", {{"p", ArgValue{0.5}}});
  d->setup({{8}});
  const BackwardNeeds n = d->backward_needs(query({4, 8}, {4, 8}, DType::F32, MemoryPath::CpuReference));
  EXPECT_FALSE(n.input || n.output);
  auto add = make_layer("add", {});
  add->setup({{8}, {8}});
  EXPECT_FALSE(add->backward_needs(query({4, 8}, {4, 8}, DType::F32, MemoryPath::CpuOnednn)).output);
  EXPECT_TRUE(add->backward_needs(query({4, 8}, {4, 8}, DType::F32, MemoryPath::CpuOnednn, Epilogue::Relu)).output);
}

TEST(BackwardNeeds, BatchNormKeepsInputAndStatisticsAndWithAFoldedReluItsOutput) {
  auto bn = make_layer("batchnorm2d", {});
  bn->setup({{64, 8, 8}});
  const Shape s{2, 64, 8, 8};
  BackwardNeeds n = bn->backward_needs(query(s, s, DType::BF16, MemoryPath::Cuda));
  EXPECT_TRUE(n.input);
  EXPECT_FALSE(n.output);
  EXPECT_EQ(n.kept_bytes, 2u * 64 * 4);  // saved mean and 1/std, f32
  n = bn->backward_needs(query(s, s, DType::BF16, MemoryPath::Cuda, Epilogue::Relu));
  EXPECT_TRUE(n.output);
  EXPECT_EQ(n.scratch_bytes, 2u * 64 * 8 * 8 * 2);  // g = dy * (y > 0), bf16
  n = bn->backward_needs(query(s, s, DType::BF16, MemoryPath::Cuda, Epilogue::AddRelu));
  EXPECT_EQ(n.scratch_bytes, 0u);  // g goes into the residual's gradient
}

TEST(BackwardNeeds, ConvKeepsItsInputAndOnTheGpuInBf16ItsKrscCopies) {
  auto conv = make_layer("conv2d", {{"out_channels", ArgValue{int64_t{8}}}, {"kernel", ArgValue{int64_t{3}}}});
  conv->setup({{4, 6, 6}});
  const BackwardNeeds n = conv->backward_needs(query({2, 4, 6, 6}, {2, 8, 4, 4}, DType::BF16, MemoryPath::Cuda));
  EXPECT_TRUE(n.input);
  EXPECT_FALSE(n.output);
  EXPECT_EQ(n.scratch_bytes, 2u * 8 * 4 * 3 * 3 * 2);
}

TEST(BackwardNeeds, LinearWithAFoldedGeluKeepsThePreActivation) {
  auto l = make_layer("linear", {{"out_features", ArgValue{int64_t{12}}}});
  l->setup({{5, 3}});
  const BackwardNeeds n =
      l->backward_needs(query({2, 5, 3}, {2, 5, 12}, DType::BF16, MemoryPath::Cuda, Epilogue::Gelu));
  EXPECT_TRUE(n.input);
  EXPECT_FALSE(n.output);
  EXPECT_EQ(n.kept_bytes, 2u * 5 * 12 * 2);
}

TEST(BackwardNeeds, AttentionOnCudnnKeepsQkvAttAndTheRowsLogSumExp) {
  auto a = make_layer("causal_self_attention", {{"n_head", ArgValue{int64_t{2}}}});
  a->setup({{6, 16}});  // T 6, C 16, head dim 8
  const BackwardNeeds n = a->backward_needs(query({3, 6, 16}, {3, 6, 16}, DType::BF16, MemoryPath::Cuda));
  EXPECT_TRUE(n.input);
  EXPECT_FALSE(n.output);
  EXPECT_EQ(n.kept_bytes, 3u * 6 * 4 * 16 * 2 + 3u * 2 * 6 * 4);
  const BackwardNeeds cpu = a->backward_needs(query({3, 6, 16}, {3, 6, 16}, DType::F32, MemoryPath::CpuReference));
  EXPECT_EQ(cpu.kept_bytes, 3u * 6 * 4 * 16 * 4 + 3u * 2 * 6 * 6 * 4);  // qkv, att, P
}

}  // namespace
}  // namespace dp::test
