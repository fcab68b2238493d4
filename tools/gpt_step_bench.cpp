// gpt_step_bench: training-step throughput of the gpt2 preset on the CPU, for
// tools/bench/gpt_vs_torch.py. One process, the model built from the arguments, one batch of random
// token ids resident in memory (as the PyTorch side has it: no loader on either side); each step is
// what a dptrain training step computes: zero_grad, forward, the mean cross-entropy over every
// position, backward, AdamW over the flat arena.
//
//   gpt_step_bench n_layer n_head n_embd block_size vocab_size batch warmup steps [dropout] [onednn|reference]
//                  [auto|onednn|openblas|mkl]   (the last: train.cpu_gemm, the linear products' library)
//
// Prints one JSON line: {"tokens_per_s": median over the timed steps, "step_ms": [...], ...}.
// Threads: OMP_NUM_THREADS (the OpenMP pool oneDNN and OpenBLAS share).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/rng.h"
#include "kernels/cpu/bf16_isa.h"
#include "kernels/cpu/cpu_env.h"
#include "kernels/cpu/isa.h"
#include "models/build.h"
#include "models/layers/softmax_cross_entropy/softmax_cross_entropy.h"
#include "runtime/optim/optimizer.h"

namespace {

using namespace dp;

int run(int argc, char** argv) {
  auto arg = [&](int i) { return std::atoll(argv[i]); };
  ModelConfig mc;
  mc.preset = PresetKind::Gpt2;
  mc.n_layer = arg(1), mc.n_head = arg(2), mc.n_embd = arg(3), mc.block_size = arg(4), mc.vocab_size = arg(5);
  const int64_t B = arg(6), warmup = arg(7), steps = arg(8), T = mc.block_size, V = mc.vocab_size;
  mc.dropout = argc > 9 ? std::atof(argv[9]) : 0.0;
  auto g = models::build_model(mc, {T}, 1);
  g->set_cpu_backend(argc > 10 && std::string(argv[10]) == "reference" ? CpuBackend::Reference : CpuBackend::OneDnn);
  const std::string gemm = argc > 11 ? argv[11] : "auto";
  g->set_cpu_gemm(gemm == "onednn"     ? CpuGemm::Onednn
                  : gemm == "openblas" ? CpuGemm::Openblas
                  : gemm == "mkl"      ? CpuGemm::Mkl
                                       : CpuGemm::Auto);
  // train.precision = "bf16" on the CPU: the linear products on oneDNN's bf16 matmul (autocast's).
  const bool bf16 = argc > 12 && std::string(argv[12]) == "bf16";
  if (bf16 && kernels::cpu::cpu_bf16_path(kernels::cpu::onednn_isa_name()) == kernels::cpu::CpuBf16Path::None)
    throw std::runtime_error(kernels::cpu::cpu_bf16_refusal(kernels::cpu::onednn_isa_name(), kernels::cpu::onednn_isa_limit()));
  g->set_cpu_matmul_bf16(bf16);
  optim::AdamWOptions o;
  o.beta1 = 0.9, o.beta2 = 0.99, o.weight_decay = 0.1;
  auto opt = optim::make_adamw(g->num_parameters(), o);
  Tensor x = Tensor::zeros({B, T}, DType::I32), y = Tensor::zeros({B * T}, DType::I32);
  Rng rng(1, 2);
  for (int64_t i = 0; i < B * T; ++i) {
    x.data<int32_t>()[i] = static_cast<int32_t>(rng.below(V));
    y.data<int32_t>()[i] = static_cast<int32_t>(rng.below(V));
  }
  Tensor dlogits = Tensor::zeros({B, T, V});
  Tensor flat_d = dlogits.reshape({B * T, V});
  const models::SoftmaxCrossEntropy ce;
  std::vector<double> ms;
  double loss = 0;
  for (int64_t s = 0; s < warmup + steps; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    const StepContext ctx{true, 7, static_cast<uint64_t>(s)};
    g->zero_grad();
    const Tensor& logits = g->forward(ctx, x);
    loss = ce.forward_backward(logits.reshape({B * T, V}), y, &flat_d);
    g->backward(ctx, dlogits);
    opt->step(g->params().flat(), g->grads().flat(), 1e-4);
    const double dt = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (s >= warmup) ms.push_back(dt);
  }
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted.empty() ? 0 : sorted[sorted.size() / 2];
  std::string list;
  for (double m : ms) list += (list.empty() ? "" : ", ") + std::to_string(m);
  std::printf("{\"tokens_per_s\": %.1f, \"median_step_ms\": %.2f, \"step_ms\": [%s], \"params\": %lld, \"loss\": %.4f}\n",
              median > 0 ? static_cast<double>(B * T) / (median / 1000.0) : 0.0, median, list.c_str(),
              static_cast<long long>(g->num_parameters()), loss);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  dp::kernels::cpu::ensure_cpu_env(argv);  // OpenBLAS's kernels for this CPU, the spin count (may re-execute)
  if (argc < 9) {
    std::fprintf(stderr, "usage: gpt_step_bench n_layer n_head n_embd block_size vocab_size batch warmup steps "
                         "[dropout] [onednn|reference] [auto|onednn|openblas|mkl] [fp32|bf16]\n");
    return 2;
  }
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpt_step_bench: %s\n", e.what());
    return 1;
  }
}
