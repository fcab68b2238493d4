// Oracle helper for tests/oracle/test_tokens_numpy.py and test_gpt_train_torch.py: runs dptrain's
// token data path and its language-model training pieces so that Python can redo them with numpy
// and PyTorch.
//
//   tokens_dump windows <pattern> <T> <vocab> <world> <seed> <epoch> <batch>
//       Prints JSON {"windows": n, "ranks": [[{"indices": [...], "x": [[...]], "y": [[...]]}, ...], ...]}:
//       every rank's batches of the epoch (DistributedSampler over the windows with torch's
//       permutation, data.permutation = "torch"), as the CPU loader makes them (BatchFormat::Tokens).
//   tokens_dump xent <out.safetensors> <seed>
//       Random logits (N, T, V) and targets (N, T); writes them with our mean loss over every
//       position ("loss" (1) f64), its gradient "dlogits" (N, T, V) and the top-1 hits ("hits" (1) f64).
//   tokens_dump clip <out.safetensors> <seed> <max_norm>
//       A parameter arena of several shapes with random gradients; writes "grad.<i>" before and
//       "clipped.<i>" after GradClipper, and "norm" (1) f64; metadata "shapes" (JSON).
//   tokens_dump decay <out.safetensors> <seed> <adamw|sgd>
//       The same arena, 10 steps of AdamW (or SGD with momentum) with weight decay 0.1 under
//       train.decay_params = "matrices": "param0.<i>", "grads.<i>" (10, shape), "lrs" (10) f64,
//       "param.<i>" final; metadata "shapes".
#include <cstdio>
#include <fmt/format.h>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "base/error.h"
#include "launch/evaluate.h"
#include "models/layers/softmax_cross_entropy/softmax_cross_entropy.h"
#include "runtime/arena.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/data/loader.h"
#include "runtime/data/sampler.h"
#include "runtime/data/token_dataset.h"
#include "runtime/optim/adamw.h"
#include "runtime/optim/grad_clip.h"
#include "runtime/optim/param_groups.h"
#include "runtime/optim/sgd.h"

namespace {

using namespace dp;

Tensor randn(std::mt19937_64& g, const Shape& shape, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  Tensor t = Tensor::zeros(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(g);
  return t;
}

nlohmann::json rows_of(const Tensor& t) {
  nlohmann::json out = nlohmann::json::array();
  const int64_t cols = t.dim(1);
  for (int64_t r = 0; r < t.dim(0); ++r)
    out.push_back(std::vector<int32_t>(t.data<int32_t>() + r * cols, t.data<int32_t>() + (r + 1) * cols));
  return out;
}

int windows(char** a) {
  const std::string pattern = a[0];
  const int64_t T = std::stoll(a[1]), vocab = std::stoll(a[2]), batch = std::stoll(a[6]);
  const int world = std::stoi(a[3]);
  const uint64_t seed = std::stoull(a[4]), epoch = std::stoull(a[5]);
  auto ds = data::open_token_shards(pattern, {T, vocab, "data.path"});
  nlohmann::json out = {{"windows", ds->size()}, {"ranks", nlohmann::json::array()}};
  for (int r = 0; r < world; ++r) {
    const auto idx = data::sampler_indices(ds->size(), world, r, true, seed, epoch, false, data::Permutation::Torch);
    data::Loader l(*ds, idx, static_cast<int>(batch), false, data::Transform{}, seed, epoch, 3, data::BatchFormat::Tokens,
                   2);
    nlohmann::json batches = nlohmann::json::array();
    for (data::Batch b; l.next(b);)
      batches.push_back({{"indices", b.indices}, {"x", rows_of(b.x)}, {"y", rows_of(b.y)}});
    out["ranks"].push_back(batches);
  }
  std::cout << out.dump() << "\n";
  return 0;
}

int xent(char** a) {
  std::mt19937_64 g(std::stoull(a[1]));
  const int64_t N = 3, T = 7, V = 50;
  Tensor logits = randn(g, {N, T, V}, 2.0f), y = Tensor::zeros({N, T}, DType::I32);
  std::uniform_int_distribution<int32_t> u(0, V - 1);
  for (int64_t i = 0; i < N * T; ++i) y.data<int32_t>()[i] = u(g);
  Tensor d = Tensor::zeros(logits.shape());
  // As the trainer: the logits as (N T, V) rows, the targets as (N T), the gradient into d's rows.
  const Tensor z = launch::score_rows(logits), rows = launch::label_rows(y), dz = d.reshape(z.shape());
  models::SoftmaxCrossEntropy loss;
  Tensor l = Tensor::zeros({1}, DType::F64), hits = Tensor::zeros({1}, DType::F64);
  l.data<double>()[0] = loss.forward_backward(z, rows, &dz);
  int64_t top1 = 0, top5 = 0;
  launch::count_hits(z, rows, top1, top5);
  hits.data<double>()[0] = static_cast<double>(top1);
  write_safetensors(a[0], {{"logits", logits}, {"targets", y}, {"loss", l}, {"dlogits", d}, {"hits", hits}}, {});
  return 0;
}

// Weights, biases, LayerNorm-like vectors and an embedding: dims 2 and 1 interleaved.
Arena arena_of(std::vector<Shape>& shapes) {
  shapes = {{48, 32}, {48}, {32}, {32}, {100, 32}, {16, 48}, {16}};
  Arena a;
  for (size_t i = 0; i < shapes.size(); ++i) a.add(fmt::format("p{}", i), shapes[i]);
  a.allocate(DType::F32, Device::cpu());
  return a;
}

std::string shapes_json(const std::vector<Shape>& shapes) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& s : shapes) j.push_back(s);
  return j.dump();
}

int clip(char** a) {
  std::mt19937_64 g(std::stoull(a[1]));
  const double max_norm = std::stod(a[2]);
  std::vector<Shape> shapes;
  Arena grads = arena_of(shapes);
  std::vector<std::pair<std::string, Tensor>> out;
  for (int i = 0; i < grads.size(); ++i) {
    grads.tensor(i).copy_from(randn(g, shapes[i], 0.05f * static_cast<float>(i + 1)));
    out.emplace_back("grad." + std::to_string(i), grads.tensor(i).clone());
  }
  Tensor norm = Tensor::zeros({1}, DType::F64);
  norm.data<double>()[0] = optim::GradClipper(max_norm).clip(grads.flat());
  for (int i = 0; i < grads.size(); ++i) out.emplace_back("clipped." + std::to_string(i), grads.tensor(i).clone());
  out.emplace_back("norm", norm);
  write_safetensors(a[0], out, {{"shapes", shapes_json(shapes)}, {"max_norm", a[2]}});
  return 0;
}

int decay(char** a) {
  std::mt19937_64 g(std::stoull(a[1]));
  const bool adam = std::string(a[2]) == "adamw";
  constexpr int kSteps = 10;
  std::vector<Shape> shapes;
  Arena params = arena_of(shapes), grads = params.like(DType::F32, Device::cpu());
  std::vector<std::pair<std::string, Tensor>> out;
  for (int i = 0; i < params.size(); ++i) {
    params.tensor(i).copy_from(randn(g, shapes[i], 1.0f));
    out.emplace_back("param0." + std::to_string(i), params.tensor(i).clone());
  }
  auto opt = adam ? optim::make_adamw(params.numel(), {.weight_decay = 0.1})
                  : optim::make_sgd(params.numel(), {.momentum = 0.9, .weight_decay = 0.1});
  opt->skip_decay(optim::decay_skip_spans(params, optim::DecayParams::Matrices));
  std::vector<Tensor> steps(static_cast<size_t>(params.size()));
  for (int i = 0; i < params.size(); ++i) {
    Shape s{kSteps};
    s.insert(s.end(), shapes[i].begin(), shapes[i].end());
    steps[i] = Tensor::zeros(s);
  }
  Tensor lrs = Tensor::zeros({kSteps}, DType::F64);
  for (int k = 0; k < kSteps; ++k) {
    for (int i = 0; i < params.size(); ++i) {
      grads.tensor(i).copy_from(randn(g, shapes[i], 0.1f));
      steps[i].narrow0(k, 1).copy_from(grads.tensor(i).reshape(steps[i].narrow0(k, 1).shape()));
    }
    const double lr = (adam ? 1e-2 : 5e-2) * (1.0 - 0.05 * k);
    lrs.data<double>()[k] = lr;
    opt->step(params.flat(), grads.flat(), lr);
  }
  for (int i = 0; i < params.size(); ++i) {
    out.emplace_back("grads." + std::to_string(i), steps[i]);
    out.emplace_back("param." + std::to_string(i), params.tensor(i).clone());
  }
  out.emplace_back("lrs", lrs);
  write_safetensors(a[0], out, {{"shapes", shapes_json(shapes)}, {"optimizer", a[2]}});
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::map<std::string, std::pair<int, int (*)(char**)>> commands = {
      {"windows", {7, windows}}, {"xent", {2, xent}}, {"clip", {3, clip}}, {"decay", {3, decay}}};
  const auto it = argc >= 2 ? commands.find(argv[1]) : commands.end();
  if (it == commands.end() || argc - 2 != it->second.first) {
    std::fprintf(stderr, "usage: tokens_dump windows|xent|clip|decay ... (see tests/oracle/tokens_dump.cpp)\n");
    return 2;
  }
  try {
    return it->second.second(argv + 2);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tokens_dump: %s\n", e.what());
    return 1;
  }
}
