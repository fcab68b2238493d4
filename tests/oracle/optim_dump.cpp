// Oracle helper for tests/oracle/test_optim_torch.py: runs our optimizers and LR schedules so
// that Python can replay them with torch.optim.
//
//   optim_dump optim <out.safetensors> [seed]
//       For every variant (SGD plain / momentum / nesterov+wd / dampening; AdamW with and without
//       weight decay): 10 steps over n pseudo-random parameters with a pseudo-random gradient and
//       a learning rate per step. Writes, per variant v:
//         v.params0 (n) f32, v.grads (10, n) f32, v.lrs (10) f64, v.params (n) f32 final,
//         v.state.<slot> (n) f32 final optimizer state
//       and metadata: "variants" (comma-separated names), "variant.<v>" (its options as JSON),
//       "seed", "steps".
//   optim_dump lr key=value ...
//       Prints lr_at(options, s, total_steps) for s in [0, count) as a JSON list. Keys: the fields
//       of ScheduleOptions, total_steps, count.
#include <cstdio>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>

#include "runtime/optim/adamw.h"
#include "runtime/optim/schedule.h"
#include "runtime/optim/sgd.h"
#include "base/rng.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/suggest.h"

namespace {

using namespace dp;
using namespace dp::optim;

constexpr int64_t kNumel = 4099;  // odd, so no kernel gets only whole vectors
constexpr int kSteps = 10;

struct Variant {
  std::string name;
  nlohmann::json options;  // what Python passes to torch
  std::function<std::unique_ptr<Optimizer>()> make;
  double base_lr;
};

std::vector<Variant> variants() {
  std::vector<Variant> v;
  auto sgd = [&](std::string name, SgdOptions o, double lr) {
    nlohmann::json j = {{"kind", "sgd"},          {"momentum", o.momentum}, {"dampening", o.dampening},
                        {"weight_decay", o.weight_decay}, {"nesterov", o.nesterov}};
    v.push_back({std::move(name), j, [o] { return make_sgd(kNumel, o); }, lr});
  };
  auto adamw = [&](std::string name, AdamWOptions o, double lr) {
    nlohmann::json j = {{"kind", "adamw"}, {"beta1", o.beta1}, {"beta2", o.beta2}, {"eps", o.eps},
                        {"weight_decay", o.weight_decay}};
    v.push_back({std::move(name), j, [o] { return make_adamw(kNumel, o); }, lr});
  };
  sgd("sgd_plain", {}, 0.1);
  sgd("sgd_momentum", {.momentum = 0.9}, 0.05);
  sgd("sgd_nesterov_wd", {.momentum = 0.9, .weight_decay = 1e-2, .nesterov = true}, 0.05);
  sgd("sgd_dampening", {.momentum = 0.8, .dampening = 0.3, .weight_decay = 5e-4}, 0.05);
  adamw("adamw_wd", {.weight_decay = 0.05}, 1e-2);
  adamw("adamw_no_wd", {.beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0}, 3e-3);
  return v;
}

Tensor randn(Rng& rng, const Shape& shape, double scale) {
  Tensor t = Tensor::zeros(shape);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(scale * rng.normal());
  return t;
}

void run_optimizers(const std::string& path, uint64_t seed) {
  std::vector<std::pair<std::string, Tensor>> out;
  std::map<std::string, std::string> meta = {{"seed", std::to_string(seed)}, {"steps", std::to_string(kSteps)}};
  std::string names;
  uint64_t stream = 0;
  for (const auto& v : variants()) {
    Rng rng(seed, stream++);
    Tensor params0 = randn(rng, {kNumel}, 1.0);
    Tensor grads = Tensor::zeros({kSteps, kNumel});
    Tensor lrs = Tensor::zeros({kSteps}, DType::F64);
    for (int s = 0; s < kSteps; ++s) {
      // Gradient scale varies per step, so the moments see a changing signal.
      grads.narrow0(s, 1).copy_from(randn(rng, {1, kNumel}, 0.1 + 0.2 * s));
      // A warmup + cosine schedule, so every step has its own lr.
      ScheduleOptions so{.kind = ScheduleKind::Cosine, .base_lr = v.base_lr, .warmup_steps = 3, .warmup_start_factor = 0.2,
                         .min_lr = v.base_lr / 10};
      lrs.data<double>()[s] = lr_at(so, s, kSteps);
    }
    auto opt = v.make();
    Tensor params = params0.clone();
    for (int s = 0; s < kSteps; ++s) opt->step(params, grads.narrow0(s, 1).reshape({kNumel}), lrs.data<double>()[s]);
    out.emplace_back(v.name + ".params0", params0);
    out.emplace_back(v.name + ".grads", grads);
    out.emplace_back(v.name + ".lrs", lrs);
    out.emplace_back(v.name + ".params", params);
    for (const auto& [slot, t] : opt->state()) out.emplace_back(v.name + ".state." + slot, t);
    meta["variant." + v.name] = v.options.dump();
    names += (names.empty() ? "" : ",") + v.name;
  }
  meta["variants"] = names;
  write_safetensors(path, out, meta);
}

void print_lrs(int argc, char** argv) {
  ScheduleOptions o;
  int64_t total = 0, count = -1;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto eq = a.find('=');
    DP_CHECK(eq != std::string::npos, "argument '{}' is not key=value", a);
    std::string k = a.substr(0, eq), val = a.substr(eq + 1);
    if (k == "kind") {
      const auto kind = enum_from_name<ScheduleKind>(val);
      DP_CHECK(kind, "unknown kind '{}': use one of {}", val, join(enum_name_list<ScheduleKind>()));
      o.kind = *kind;
    } else if (k == "base_lr") o.base_lr = std::stod(val);
    else if (k == "warmup_steps") o.warmup_steps = std::stoll(val);
    else if (k == "warmup_start_factor") o.warmup_start_factor = std::stod(val);
    else if (k == "step_size") o.step_size = std::stoll(val);
    else if (k == "gamma") o.gamma = std::stod(val);
    else if (k == "min_lr") o.min_lr = std::stod(val);
    else if (k == "total_steps") total = std::stoll(val);
    else if (k == "count") count = std::stoll(val);
    else DP_CHECK(false, "unknown key '{}'", k);
  }
  if (count < 0) count = total + 1;
  nlohmann::json out = nlohmann::json::array();
  for (int64_t s = 0; s < count; ++s) out.push_back(lr_at(o, s, total));
  std::cout << out.dump() << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc >= 2 ? argv[1] : "";
  if (!((mode == "optim" && (argc == 3 || argc == 4)) || mode == "lr")) {
    std::fprintf(stderr, "usage: %s optim <out.safetensors> [seed] | lr key=value ...\n", argv[0]);
    return 2;
  }
  try {
    if (mode == "optim") run_optimizers(argv[2], argc == 4 ? std::stoull(argv[3]) : 1234);
    else print_lrs(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "optim_dump: %s\n", e.what());
    return 1;
  }
  return 0;
}
