// Oracle helper: the model of a cfg, initialised the way a training run initialises it
// (models::build_model with run.seed, then model.init / model.init_skip through
// launch::init_model_weights, as TrainSession does before its first step), run in eval mode on
// the input tensor "x" of a safetensors file; writes the logits and the model's state for
// tests/oracle/test_finetune_torchvision.py.
//   init_dump <model.cfg> <input.safetensors> <out.safetensors>
#include <cstdio>
#include <string>

#include "launch/train_setup.h"
#include "models/build.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/config.h"
#include "runtime/suggest.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: init_dump <model.cfg> <input.safetensors> <out.safetensors>\n");
    return 2;
  }
  try {
    const dp::Config cfg = dp::load_config(argv[1]);
    const dp::Tensor x = dp::SafetensorsFile::open(argv[2]).get("x");  // (N, C, H, W) f32
    const dp::Shape sample(x.shape().begin() + 1, x.shape().end());
    auto g = dp::models::build_model(cfg.model, sample, static_cast<uint64_t>(cfg.run.seed));
    const dp::WeightsLoad w = dp::launch::init_model_weights(cfg.model, *g);
    const dp::Tensor logits = g->forward(dp::StepContext{false, static_cast<uint64_t>(cfg.run.seed), 0}, x).clone();
    std::vector<std::pair<std::string, dp::Tensor>> out;
    for (const auto& nt : g->state()) out.emplace_back(nt.name, nt.tensor);
    out.emplace_back("__logits__", logits);
    dp::write_safetensors(argv[3], out, {{"skipped", dp::join(w.plan.skipped)}, {"loaded", std::to_string(w.plan.load.size())}});
    std::printf("init_dump: %zu tensors loaded, skipped: %s\n", w.plan.load.size(), dp::join(w.plan.skipped).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "init_dump: %s\n", e.what());
    return 1;
  }
  return 0;
}
