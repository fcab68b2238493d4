// Oracle helper: builds a dptrain preset (seeded), runs two training-mode forwards so the
// batch-norm running statistics are not trivial, then an eval-mode forward on a fixed input, and
// writes the state dict, the input and the logits as safetensors for
// tests/oracle/test_resnet_torchvision.py.
//   resnet_dump <preset> <out.safetensors> [image_size] [num_classes]
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>

#include "models/build.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/suggest.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: resnet_dump <preset> <out.safetensors> [image_size] [num_classes]\n");
    return 2;
  }
  try {
    const int64_t size = argc > 3 ? std::stoll(argv[3]) : 64;
    dp::ModelConfig mc;
    const std::optional<dp::PresetKind> preset = dp::enum_from_name<dp::PresetKind>(argv[1]);
    if (!preset || *preset == dp::PresetKind::None)
      throw std::runtime_error(fmt::format("unknown preset '{}' (presets: {})", argv[1],
                                           dp::join(dp::enum_name_list<dp::PresetKind>())));
    mc.preset = *preset;
    const std::string name(dp::enum_name(mc.preset));
    mc.num_classes = argc > 4 ? std::stoll(argv[4]) : 1000;
    auto g = dp::models::build_model(mc, {3, size, size}, /*seed=*/42);
    dp::Rng rng(7, 99);
    auto random_input = [&](int64_t n) {
      dp::Tensor x = dp::Tensor::zeros({n, 3, size, size});
      float* p = x.data<float>();
      for (int64_t i = 0; i < x.numel(); ++i) p[i] = static_cast<float>(rng.normal());
      return x;
    };
    for (int i = 0; i < 2; ++i) g->forward(dp::StepContext{true, 42, static_cast<uint64_t>(i)}, random_input(4));
    dp::Tensor x = random_input(2);
    dp::Tensor logits = g->forward(dp::StepContext{false, 42, 2}, x).clone();
    std::vector<std::pair<std::string, dp::Tensor>> out;
    for (const auto& nt : g->state()) out.emplace_back(nt.name, nt.tensor);
    out.emplace_back("__input__", x);
    out.emplace_back("__logits__", logits);
    dp::write_safetensors(argv[2], out,
                          {{"preset", name}, {"num_parameters", std::to_string(g->num_parameters())}});
    std::printf("%s: %lld parameters, %zu state tensors\n", name.c_str(),
                static_cast<long long>(g->num_parameters()), g->state().size());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "resnet_dump: %s\n", e.what());
    return 1;
  }
  return 0;
}
