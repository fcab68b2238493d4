// Oracle helper: runs every layer case of tests/models/layer_harness.h (in f32 and in f64 on the
// reference kernels, and in f32 on the oneDNN backend: cases named <case>_onednn) and
// the softmax cross-entropy loss, and writes everything PyTorch needs to redo them into ONE
// safetensors file for tests/oracle/test_layers_torch.py:
//   <case>.x (or .x0/.x1), <case>.<param>, <case>.<buffer>.before / .after, <case>.y,
//   <case>.dy, <case>.dx (or .dx0/.dx1), <case>.d<param>;
//   loss cases: <case>.logits, .labels (i32), .loss (f64 [1]), .dlogits.
// Metadata: "format" = "dptrain-layers-oracle/1" and "cases" = a JSON list of
//   {name, type, args, dtype, training, seed, step, inputs, params, buffers} (loss cases: type
//   "softmax_cross_entropy", args {label_smoothing}).
//   layers_dump <out.safetensors>
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "models/layers/softmax_cross_entropy/softmax_cross_entropy.h"
#include "runtime/checkpoint/safetensors.h"
#include "tests/models/layer_harness.h"

namespace {

using dp::DType;
using dp::Tensor;
using Entries = std::vector<std::pair<std::string, Tensor>>;

// FNV-1a: a per-case RNG stream that is the same on every platform.
uint64_t stream_of(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

nlohmann::json args_json(const std::map<std::string, dp::ArgValue>& args) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : args) std::visit([&, key = k](const auto& x) { j[key] = x; }, v);
  return j;
}

// One layer case: forward then backward with a random upstream gradient.
nlohmann::json dump_layer(const dp::test::LayerCase& c, DType dtype, dp::CpuBackend backend, const std::string& name,
                          Entries& out) {
  using namespace dp::test;
  TestLayer t = make_test_layer(c, dtype, /*seed=*/31);
  const auto decls = t.layer->declare_params();
  dp::Rng rng(41, stream_of(name));
  std::vector<Tensor> x = t.random_inputs(c.batch, rng);
  dp::StepContext ctx = case_ctx(c);
  ctx.cpu_backend = backend;
  nlohmann::json meta{{"name", name},         {"type", c.type},      {"args", args_json(c.args)},
                      {"dtype", dp::dtype_name(dtype)}, {"training", c.training}, {"seed", ctx.seed},
                      {"step", ctx.step},      {"inputs", x.size()}, {"ids", c.ids}};
  auto input_name = [&](const char* stem, size_t k) {
    return x.size() == 1 ? std::string(stem) : fmt::format("{}{}", stem, k);
  };
  for (size_t k = 0; k < x.size(); ++k) out.emplace_back(name + "." + input_name("x", k), x[k]);
  nlohmann::json params = nlohmann::json::array(), buffers = nlohmann::json::array();
  for (size_t j = 0, p = 0, b = 0; j < decls.size(); ++j) {
    if (decls[j].trainable) {
      out.emplace_back(name + "." + decls[j].name, t.params[p++]);
      params.push_back(decls[j].name);
    } else {
      out.emplace_back(name + "." + decls[j].name + ".before", t.buffers[b++].clone());
      buffers.push_back(decls[j].name);
    }
  }
  meta["params"] = params;
  meta["buffers"] = buffers;
  Tensor y = t.forward(ctx, x);
  Tensor dy = random_normal(y.shape(), dtype, rng);
  std::vector<Tensor> dx = t.backward(ctx, x, y, dy);
  for (size_t j = 0, b = 0; j < decls.size(); ++j)
    if (!decls[j].trainable) out.emplace_back(name + "." + decls[j].name + ".after", t.buffers[b++]);
  out.emplace_back(name + ".y", y);
  out.emplace_back(name + ".dy", dy);
  for (size_t k = 0; k < dx.size(); ++k)
    if (dx[k].defined()) out.emplace_back(name + "." + input_name("dx", k), dx[k]);  // ids have none
  for (size_t j = 0, p = 0; j < decls.size(); ++j)
    if (decls[j].trainable) out.emplace_back(name + ".d" + decls[j].name, t.grads[p++]);
  return meta;
}

nlohmann::json dump_loss(const std::string& name, double smoothing, DType dtype, Entries& out) {
  const int64_t N = 6, K = 10;
  dp::Rng rng(43, stream_of(name));
  Tensor logits = dp::test::random_normal({N, K}, dtype, rng);
  for (int64_t i = 0; i < logits.numel(); ++i) dp::test::set(logits, i, 4 * dp::test::get(logits, i));
  Tensor labels = Tensor::zeros({N}, DType::I32);
  for (int64_t n = 0; n < N; ++n) labels.data<int32_t>()[n] = static_cast<int32_t>(rng.below(K));
  Tensor dlogits = Tensor::zeros({N, K}, dtype);
  Tensor loss = Tensor::zeros({1}, DType::F64);
  loss.data<double>()[0] = dp::models::SoftmaxCrossEntropy(smoothing).forward_backward(logits, labels, &dlogits);
  out.emplace_back(name + ".logits", logits);
  out.emplace_back(name + ".labels", labels);
  out.emplace_back(name + ".loss", loss);
  out.emplace_back(name + ".dlogits", dlogits);
  return {{"name", name},
          {"type", "softmax_cross_entropy"},
          {"args", {{"label_smoothing", smoothing}}},
          {"dtype", dp::dtype_name(dtype)},
          {"training", true},
          {"inputs", 1},
          {"params", nlohmann::json::array()},
          {"buffers", nlohmann::json::array()}};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: layers_dump <out.safetensors>\n");
    return 2;
  }
  try {
    Entries out;
    nlohmann::json cases = nlohmann::json::array();
    for (DType dtype : {DType::F32, DType::F64}) {
      const std::string suffix = dtype == DType::F64 ? "_f64" : "";
      for (const auto& c : dp::test::layer_cases())
        cases.push_back(dump_layer(c, dtype, dp::CpuBackend::Reference, c.name + suffix, out));
      cases.push_back(dump_loss("xent" + suffix, 0.0, dtype, out));
      cases.push_back(dump_loss("xent_ls" + suffix, 0.1, dtype, out));
    }
    for (const auto& c : dp::test::layer_cases())
      cases.push_back(dump_layer(c, DType::F32, dp::CpuBackend::OneDnn, c.name + "_onednn", out));
    // 8-byte elements first, then 4-byte: every tensor stays aligned to its element size, which
    // PyTorch's zero-copy loading wants (runtime/checkpoint/safetensors.h).
    std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
      return dp::dtype_size(a.second.dtype()) > dp::dtype_size(b.second.dtype());
    });
    dp::write_safetensors(argv[1], out, {{"format", "dptrain-layers-oracle/1"}, {"cases", cases.dump()}});
    std::printf("layers_dump: %zu cases, %zu tensors -> %s\n", cases.size(), out.size(), argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "layers_dump: %s\n", e.what());
    return 1;
  }
  return 0;
}
