// Oracle helper for tests/oracle/test_gpt_torch.py: the gpt2 preset from a PyTorch state_dict,
// through dptrain's own code (model.init's loader, the graph, the loss, AdamW).
//
//   gpt_dump <init.safetensors> <batch.safetensors> <out.safetensors> <final.safetensors> <onednn|reference>
//
// init: weights as model.init takes them (nanoGPT names, or a Hugging Face GPT-2 checkpoint),
// with metadata n_layer, n_head, n_embd, block_size, vocab_size, bias (0/1), steps, lr, beta1,
// beta2, eps, weight_decay (decimal strings) when written by the test; a file without them (a
// Hugging Face save_pretrained file) takes them from the batch file's metadata. batch: x, y (i32
// [N, T]). Dropout 0. Writes out: logits (f32 [N, T, V], the first forward), loss (f64 [1]),
// grad.<parameter> (f32: the first step's gradient of the mean cross-entropy over all N T
// positions, each arena slot once), losses (f64 [steps]: the loss before each of `steps` AdamW
// steps on the same batch); and final: the trained model's state as final.safetensors holds it.
#include <algorithm>
#include <cstdio>
#include <string>

#include "models/build.h"
#include "models/layers/softmax_cross_entropy/softmax_cross_entropy.h"
#include "models/weights_import.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/checkpoint/weights_file.h"
#include "runtime/optim/optimizer.h"

namespace {

using namespace dp;

double meta_num(const SafetensorsFile& a, const SafetensorsFile& b, const std::string& key) {
  for (const SafetensorsFile* f : {&a, &b})
    if (const auto it = f->metadata().find(key); it != f->metadata().end()) return std::stod(it->second);
  throw std::runtime_error("metadata '" + key + "' in neither file");
}

// Forward and the mean cross-entropy over every position; with grads, the backward too.
double loss_step(Graph& g, const Tensor& x, const Tensor& y, Tensor& logits_out, bool first) {
  const StepContext ctx{true, 0, 0};
  g.zero_grad();
  const Tensor& logits = g.forward(ctx, x);
  if (first) logits_out = logits.clone();
  const int64_t rows = logits.dim(0) * logits.dim(1), V = logits.dim(2);
  Tensor dlogits = Tensor::zeros(logits.shape());
  Tensor flat_d = dlogits.reshape({rows, V});
  const double loss =
      models::SoftmaxCrossEntropy().forward_backward(logits.reshape({rows, V}), y.reshape({rows}), &flat_d);
  g.backward(ctx, dlogits);
  return loss;
}

int run(char** argv) {
  const SafetensorsFile init = SafetensorsFile::open(argv[1]);
  const SafetensorsFile batch = SafetensorsFile::open(argv[2]);
  auto num = [&](const char* k) { return meta_num(init, batch, k); };
  ModelConfig mc;
  mc.preset = PresetKind::Gpt2;
  mc.n_layer = static_cast<int64_t>(num("n_layer")), mc.n_head = static_cast<int64_t>(num("n_head"));
  mc.n_embd = static_cast<int64_t>(num("n_embd")), mc.block_size = static_cast<int64_t>(num("block_size"));
  mc.vocab_size = static_cast<int64_t>(num("vocab_size")), mc.bias = num("bias") != 0;
  const Tensor x = batch.get("x"), y = batch.get("y");
  auto g = models::build_model(mc, {x.dim(1)}, /*seed=*/0);
  g->set_cpu_backend(std::string(argv[5]) == "reference" ? CpuBackend::Reference : CpuBackend::OneDnn);
  const WeightsLoad w = load_weights(argv[1], *g, {}, "", models::weights_translator(mc));
  std::printf("gpt_dump: %zu tensors from %s%s\n", w.plan.load.size(), argv[1],
              w.translated.empty() ? "" : (" read as " + w.translated).c_str());
  optim::AdamWOptions o;
  o.beta1 = num("beta1"), o.beta2 = num("beta2"), o.eps = num("eps"), o.weight_decay = num("weight_decay");
  auto opt = optim::make_adamw(g->num_parameters(), o);
  const int64_t steps = static_cast<int64_t>(num("steps"));
  std::vector<std::pair<std::string, Tensor>> out;
  Tensor logits, losses = Tensor::zeros({std::max<int64_t>(steps, 1)}, DType::F64);
  Tensor loss = Tensor::zeros({1}, DType::F64);
  loss.data<double>()[0] = loss_step(*g, x, y, logits, true);
  for (int s = 0; s < g->params().size(); ++s) out.emplace_back("grad." + g->params().slot(s).name, g->grads().tensor(s).clone());
  for (int64_t s = 0; s < steps; ++s) {
    Tensor unused;
    losses.data<double>()[s] = loss_step(*g, x, y, unused, false);
    opt->step(g->params().flat(), g->grads().flat(), num("lr"));
  }
  out.emplace_back("loss", loss);
  out.emplace_back("losses", losses);
  out.emplace_back("logits", logits);
  // 8-byte elements first: every tensor aligned to its element size (PyTorch's zero-copy loading).
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return dtype_size(a.second.dtype()) > dtype_size(b.second.dtype());
  });
  write_safetensors(argv[3], out, {{"format", "dptrain-gpt-oracle/1"}});
  std::vector<std::pair<std::string, Tensor>> final_state;
  for (const auto& nt : g->state()) final_state.emplace_back(nt.name, nt.tensor);
  write_safetensors(argv[4], final_state, {{"format", "dptrain-weights"}, {"format_version", "1"}});
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: gpt_dump <init.safetensors> <batch.safetensors> <out.safetensors> "
                         "<final.safetensors> <onednn|reference>\n");
    return 2;
  }
  try {
    return run(argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpt_dump: %s\n", e.what());
    return 1;
  }
}
