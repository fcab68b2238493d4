// Batch norm on the GPU under every train.bn_impl (cudnn, own, cudnn_ex) and every epilogue of the
// GPU plan (none; relu; residual add + relu) against the CPU twin, f32 (NCHW) and bf16/f16 (NHWC):
//   BnImplLayersGpu: one layer, the layer cases of tests/models/test_cuda_layers.cpp's batch norm
//     and shapes that reach the kernels' other paths (C not a multiple of 4 or 8, odd H*W, 1x1
//     planes, the least batch); output, running statistics, num_batches_tracked, dx, the
//     residual's gradient, parameter gradients (accumulated), guard regions;
//   BnImplGraphGpu: a residual CNN (bn -> relu, bn -> add -> relu with an identity shortcut, an
//     add of two batch norms after a downsampling shortcut) as a whole graph against the CPU graph,
//     with the GPU plan's folds checked by name.
// The CPU reference of a fused layer is the composition: the f64 batch norm, then + r, then the
// ReLU; its backward runs on g = dy * (y > 0) with the GPU's output as the mask (the backward is
// defined by the forward's output). Tolerances as test_cuda_layers.cpp / test_cuda_graph.cpp.
// Skip without a GPU.
#ifdef DPTRAIN_HAVE_CUDA
#include <gtest/gtest.h>

#include <random>

#include "tests/gpu_test.h"
#include "models/build.h"
#include "models/layers/batchnorm2d/batchnorm2d.h"
#include "tests/kernels/cuda_test_util.h"
#include "tests/models/cuda_layer_harness.h"

namespace dp::test {
namespace {

struct Precision {
  DType compute;
  bool channels_last;
  double tol;  // normalised error bound against the f64 reference (tests/models/test_cuda_layers.cpp)
};
const Precision kPrecisions[] = {{DType::F32, false, 2e-5}, {DType::BF16, true, 1.6e-2}, {DType::F16, true, 2.5e-3}};
const BnImpl kImpls[] = {BnImpl::Cudnn, BnImpl::Own, BnImpl::CudnnEx};
const Epilogue kEpilogues[] = {Epilogue::None, Epilogue::Relu, Epilogue::AddRelu};

struct BnLayerCase {
  LayerCase layer;
  Precision precision;
  BnImpl impl;
  Epilogue epi;
};

void PrintTo(const BnLayerCase& c, std::ostream* os) {
  *os << c.layer.name << " " << dtype_name(c.precision.compute) << " " << enum_name(c.impl) << " "
      << epilogue_name(c.epi);
}

std::vector<BnLayerCase> bn_layer_cases() {
  using A = std::map<std::string, ArgValue>;
  const A m{{"momentum", ArgValue{0.2}}};
  // test_cuda_layers.cpp's two cases, then the kernels' other paths.
  const std::vector<LayerCase> layers = {
      {"bn_train", "batchnorm2d", m, {{3, 4, 5}}, 4, true},
      {"bn_eval", "batchnorm2d", A{}, {{3, 4, 5}}, 3, false},
      {"bn_c6", "batchnorm2d", m, {{6, 5, 3}}, 3, true},         // C not a multiple of 4
      {"bn_c12_hw49", "batchnorm2d", m, {{12, 7, 7}}, 2, true},  // a multiple of 4, not of 8; odd H*W
      {"bn_c64_1x1", "batchnorm2d", m, {{64, 1, 1}}, 3, true},   // 16-byte loads for every dtype; 1x1 planes
      {"bn_m2", "batchnorm2d", m, {{5, 1, 2}}, 1, true},         // the least batch: 2 values per channel
      {"bn_c64_eval", "batchnorm2d", A{}, {{64, 4, 4}}, 2, false},
  };
  std::vector<BnLayerCase> out;
  for (const auto& l : layers)
    for (const auto& p : kPrecisions)
      for (BnImpl impl : kImpls)
        for (Epilogue e : kEpilogues) out.push_back({l, p, impl, e});
  return out;
}

// A CPU f64 copy of a float or integer CPU tensor, integers value by value (layer_harness.h's
// cast() leaves integer tensors as they are and its get() reads f32/f64 only: the first GPU run's
// "tensor is i64[] on cpu, accessed as f32" for num_batches_tracked).
Tensor value_f64(const Tensor& t) {
  if (is_floating(t.dtype())) return cast(t, DType::F64);
  Tensor out = Tensor::zeros(t.shape(), DType::F64);
  for (int64_t i = 0; i < t.numel(); ++i)
    out.data<double>()[i] = t.dtype() == DType::I64 ? static_cast<double>(t.data<int64_t>()[i]) : t.data<int32_t>()[i];
  return out;
}

TEST(BnImplHarness, IntegerBuffersCompareByValue) {
  Tensor tracked = Tensor::zeros({}, DType::I64);
  tracked.data<int64_t>()[0] = 3;
  Tensor seen = Tensor::zeros({}, DType::F64);
  seen.data<double>()[0] = 3;
  EXPECT_EQ(normalised_error(seen, value_f64(tracked)), 0);
  seen.data<double>()[0] = 4;
  EXPECT_EQ(normalised_error(seen, value_f64(tracked)), 1.0 / 3);
}

// act(y + r) in f64 (the CPU composition of a fused layer).
Tensor epilogue_ref(const Tensor& y, const Tensor* r, Epilogue e) {
  Tensor out = cast(y, DType::F64);
  if (e == Epilogue::None) return out;
  for (int64_t i = 0; i < out.numel(); ++i) {
    const double v = get(out, i) + (r ? get(*r, i) : 0.0);
    set(out, i, v > 0 ? v : 0.0);
  }
  return out;
}

// One execution context for the suite's 201 cases (made on first use, with a GPU only): handle
// creation per case would cost the GPU run's short time box seconds. Never destroyed: at exit the
// CUDA runtime may be unloading before a static's destructor would run.
cuda::ExecContext& shared_exec() {
  static cuda::ExecContext* exec = new cuda::ExecContext(0, size_t{64} << 20);
  return *exec;
}

class BnImplLayersGpu : public ::dp::gputest::GpuTestWithParam<BnLayerCase> {};

DP_GPU_TEST_P(BnImplLayersGpu, MatchCpuTwin) {
  const BnLayerCase& bc = GetParam();
  const LayerCase& c = bc.layer;
  const Precision& p = bc.precision;
  const uint64_t seed = (uint64_t{std::random_device{}()} << 32) | std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  const Device dev = Device::cuda(0);
  cuda::ExecContext& exec = shared_exec();
  const bool add = bc.epi == Epilogue::AddRelu;

  TestLayer cpu = make_test_layer(c, DType::F64, seed);
  for (auto& t : cpu.params) t.copy_from(gpu::rounded(t, DType::F32));
  gpu::GpuLayer g(c, cpu, p.compute, dev);
  dynamic_cast<models::BatchNorm2d&>(*g.layer).set_gpu_impl(bc.impl);
  g.layer->set_epilogue(bc.epi);
  Rng rng(seed, 1);
  std::vector<Tensor> x = cpu.random_inputs(c.batch, rng);
  for (auto& t : x) t = gpu::rounded(t, p.compute);
  const Tensor r = gpu::rounded(random_normal(x[0].shape(), DType::F64, rng), p.compute);

  StepContext ctx = case_ctx(c);
  ctx.gpu = &exec;
  ctx.compute = p.compute;
  ctx.channels_last = p.channels_last;
  const StepContext cpu_ctx = case_ctx(c);

  std::vector<Tensor> xd{gpu::upload(x[0], p.compute, p.channels_last, dev)};
  if (add) xd.push_back(gpu::upload(r, p.compute, p.channels_last, dev));
  Tensor yd = gpu::guarded_zeros(with_batch(c.batch, g.out), p.compute, dev);
  g.layer->forward(ctx, xd, yd);
  const Tensor ybn = cpu.forward(cpu_ctx, x);
  const Tensor yref = epilogue_ref(ybn, add ? &r : nullptr, bc.epi);
  const Tensor ygpu = gpu::download(yd, p.channels_last);
  EXPECT_LT(normalised_error(ygpu, yref), p.tol) << "output";
  EXPECT_TRUE(gpu::guards_intact(yd)) << "output written out of bounds";
  for (size_t j = 0; j < cpu.buffers.size(); ++j)
    if (is_floating(cpu.buffers[j].dtype()))
      EXPECT_LT(normalised_error(gpu::download(g.buffers[j], false), cpu.buffers[j]), p.tol) << "buffer " << j;
    else
      EXPECT_EQ(normalised_error(gpu::download(g.buffers[j], false), value_f64(cpu.buffers[j])), 0)
          << "num_batches_tracked";

  // Backward on g = dy masked by the GPU's output.
  const Tensor dy = gpu::rounded(random_normal(ybn.shape(), DType::F64, rng), p.compute);
  Tensor gref = cast(dy, DType::F64);
  if (bc.epi != Epilogue::None)
    for (int64_t i = 0; i < gref.numel(); ++i)
      if (!(get(ygpu, i) > 0)) set(gref, i, 0.0);
  const Tensor dyd = gpu::upload(dy, p.compute, p.channels_last, dev);
  std::vector<Tensor> dxd;
  for (const auto& t : xd) dxd.push_back(gpu::guarded_zeros(t.shape(), p.compute, dev));
  g.layer->backward(ctx, xd, yd, dyd, dxd);
  const std::vector<Tensor> dx = cpu.backward(cpu_ctx, x, ybn, gref);
  EXPECT_LT(normalised_error(gpu::download(dxd[0], p.channels_last), dx[0]), p.tol) << "dx";
  if (add) {
    EXPECT_EQ(normalised_error(gpu::download(dxd[1], p.channels_last), gref), 0) << "residual gradient is g";
  }
  for (const auto& t : dxd) EXPECT_TRUE(gpu::guards_intact(t)) << "dx written out of bounds";
  for (size_t j = 0; j < cpu.grads.size(); ++j) {
    EXPECT_LT(normalised_error(gpu::download(g.grads[j], false), cpu.grads[j]), p.tol) << "grad " << j;
    EXPECT_TRUE(gpu::guards_intact(g.grads[j])) << "grad " << j << " written out of bounds";
  }
  // Parameter gradients accumulate (+=): a second backward doubles them.
  g.layer->backward(ctx, xd, yd, dyd, dxd);
  for (size_t j = 0; j < cpu.grads.size(); ++j) {
    Tensor twice = cast(cpu.grads[j], DType::F64);
    for (int64_t i = 0; i < twice.numel(); ++i) set(twice, i, 2 * get(twice, i));
    EXPECT_LT(normalised_error(gpu::download(g.grads[j], false), twice), 2 * p.tol) << "accumulated grad " << j;
  }
}

INSTANTIATE_TEST_SUITE_P(AllImpls, BnImplLayersGpu, ::testing::ValuesIn(bn_layer_cases()),
                         [](const ::testing::TestParamInfo<BnLayerCase>& i) {
                           std::string e = i.param.epi == Epilogue::None ? "plain"
                                           : i.param.epi == Epilogue::Relu ? "relu"
                                                                           : "addrelu";
                           return i.param.layer.name + "_" + dtype_name(i.param.precision.compute) + "_" +
                                  std::string(enum_name(i.param.impl)) + "_" + e;
                         });

// A residual CNN with every shape the GPU plan folds: bn1 -> relu1; bn2 -> add2 (identity
// shortcut relu1) -> relu2; bn3 -> add3 <- dsbn (a downsampling shortcut's batch norm) -> relu3.
// 8 and 12 channels: 16-byte loads for f32, only for 8 channels in 16-bit data.
ModelConfig residual_net() {
  auto I = [](int64_t v) { return ArgValue{v}; };
  const ArgValue no{false};
  ModelConfig mc;
  mc.layers = {
      layer_spec("conv2d", "conv1", {{"out_channels", I(8)}, {"kernel", I(3)}, {"padding", I(1)}, {"bias", no}}),
      layer_spec("batchnorm2d", "bn1", {}),
      layer_spec("relu", "relu1", {}),
      layer_spec("conv2d", "conv2", {{"out_channels", I(8)}, {"kernel", I(3)}, {"padding", I(1)}, {"bias", no}}),
      layer_spec("batchnorm2d", "bn2", {}),
      layer_spec("add", "add2", {}, {"bn2", "relu1"}),
      layer_spec("relu", "relu2", {}),
      layer_spec("conv2d", "conv3",
                 {{"out_channels", I(12)}, {"kernel", I(3)}, {"stride", I(2)}, {"padding", I(1)}, {"bias", no}}),
      layer_spec("batchnorm2d", "bn3", {}),
      layer_spec("conv2d", "ds", {{"out_channels", I(12)}, {"kernel", I(1)}, {"stride", I(2)}, {"bias", no}},
                 {"relu2"}),
      layer_spec("batchnorm2d", "dsbn", {}),
      layer_spec("add", "add3", {}, {"bn3", "dsbn"}),
      layer_spec("relu", "relu3", {}),
      layer_spec("global_avgpool", "gap", {}),
      layer_spec("flatten", "flat", {}),
      layer_spec("linear", "fc", {{"out_features", I(5)}}),
  };
  return mc;
}

struct GraphMode {
  Precision precision;
  BnImpl impl;
  bool fusion;
  double tol;
};

class BnImplGraphGpu : public ::dp::gputest::GpuTestWithParam<GraphMode> {};

DP_GPU_TEST_P(BnImplGraphGpu, ForwardGradientsAndStatisticsMatchTheCpuGraph) {
  const GraphMode m = GetParam();
  const DType dt = m.precision.compute;
  cuda::ExecContext& exec = shared_exec();
  const Shape in{3, 12, 12};
  auto cpu = models::build_model(residual_net(), in, 5);
  auto gpu = models::build_model(residual_net(), in, 5, Device::cuda(0), dt, &exec);
  TrainConfig tc;
  tc.bn_impl = m.impl;
  tc.gpu_fusion = m.fusion;
  const std::string plan = models::apply_gpu_choices(*gpu, tc);
  Rng rng(7, 0);
  const Tensor x = gpu::rounded(random_normal({4, 3, 12, 12}, DType::F64, rng), dt);
  const Tensor dy = random_normal({4, 5}, DType::F64, rng);
  if (dt != DType::F32)
    for (const auto& node : cpu->nodes())
      if (node.layer->low_precision_params())
        for (const auto& p : node.layer->params()) p.copy_from(cast(gpu::rounded(p, dt), DType::F32));
  StepContext cctx{true, 3, 1};
  StepContext gctx{true, 3, 1};
  gctx.gpu = &exec;
  gctx.compute = dt;
  gctx.channels_last = m.precision.channels_last;

  cpu->zero_grad();
  const Tensor ycpu = cpu->forward(cctx, cast(x, DType::F32)).clone();
  cpu->backward(cctx, cast(dy, DType::F32));
  gpu->zero_grad();
  const Tensor& ygpu = gpu->forward(gctx, gpu::upload(x, dt, gctx.channels_last, Device::cuda(0)));
  EXPECT_LT(normalised_error(gpu::download(ygpu, false), ycpu), m.tol) << "output";
  gpu->backward(gctx, gpu::upload(dy, DType::F32, false, Device::cuda(0)));
  for (int s = 0; s < cpu->grads().size(); ++s)
    EXPECT_LT(normalised_error(gpu::download(gpu->grads().tensor(s), false), cpu->grads().tensor(s)), m.tol)
        << cpu->grads().slot(s).name;
  for (size_t b = 0; b < cpu->buffers().size(); ++b) {
    const Tensor& t = cpu->buffers()[b].tensor;
    if (is_floating(t.dtype()))
      EXPECT_LT(normalised_error(gpu::download(gpu->buffers()[b].tensor, false), t), m.tol) << cpu->buffers()[b].name;
    else
      EXPECT_EQ(normalised_error(gpu::download(gpu->buffers()[b].tensor, false), value_f64(t)), 0)
          << cpu->buffers()[b].name;
  }
  // The plan: what folded into what (after the forward planned it).
  std::map<std::string, std::string> folded;
  for (size_t i = 0; i < gpu->nodes().size(); ++i)
    if (gpu->folded_into(static_cast<int>(i)) >= 0)
      folded[gpu->nodes()[i].layer->name()] = gpu->nodes()[gpu->folded_into(static_cast<int>(i))].layer->name();
  const std::map<std::string, std::string> want =
      m.fusion ? std::map<std::string, std::string>{{"relu1", "bn1"}, {"add2", "bn2"}, {"relu2", "bn2"},
                                                    {"add3", "bn3"}, {"relu3", "bn3"}}
               : std::map<std::string, std::string>{};
  EXPECT_EQ(folded, want) << plan;
}

std::vector<GraphMode> graph_modes() {
  const double tol[] = {1e-4, 4e-2, 6e-3};  // tests/models/test_cuda_graph.cpp's, per precision
  std::vector<GraphMode> out;
  for (int k = 0; k < 3; ++k)
    for (BnImpl impl : kImpls) out.push_back({kPrecisions[k], impl, true, tol[k]});
  for (int k = 0; k < 3; ++k) out.push_back({kPrecisions[k], BnImpl::Cudnn, false, tol[k]});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Modes, BnImplGraphGpu, ::testing::ValuesIn(graph_modes()),
                         [](const ::testing::TestParamInfo<GraphMode>& i) {
                           return std::string(dtype_name(i.param.precision.compute)) + "_" +
                                  std::string(enum_name(i.param.impl)) + (i.param.fusion ? "_fused" : "_unfused");
                         });

}  // namespace
}  // namespace dp::test
#endif  // DPTRAIN_HAVE_CUDA
