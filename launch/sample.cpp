#include "launch/sample.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <sstream>

#include "base/rng.h"
#include "launch/train_setup.h"
#include "models/build.h"
#include "models/weights_import.h"
#include "runtime/checkpoint/weights_file.h"
#include "runtime/log.h"

namespace dp::launch {

std::vector<int32_t> prompt_tokens(const SampleOptions& o, int64_t vocab_size) {
  if (o.prompt.empty() == o.prompt_ids.empty())
    DP_THROW_USER("dptrain sample: give one of --prompt TEXT (a byte-level model, model.vocab_size = 256) or "
                  "--prompt-ids \"id, id, ...\"{}",
                  o.prompt.empty() ? "" : ", not both");
  std::vector<int32_t> ids;
  if (!o.prompt.empty()) {
    if (vocab_size != 256)
      DP_THROW_USER("dptrain sample: --prompt is text, read as bytes, but this model's vocabulary is {} tokens, not "
                    "256 bytes; give the tokenizer's ids with --prompt-ids",
                    vocab_size);
    for (unsigned char c : o.prompt) ids.push_back(c);
    return ids;
  }
  std::string s = o.prompt_ids;
  std::replace(s.begin(), s.end(), ',', ' ');
  std::istringstream in(s);
  std::string word;
  while (in >> word) {
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size() || v < 0 || v >= vocab_size)
      DP_THROW_USER("dptrain sample: --prompt-ids: '{}' is not a token id in [0, {}) (model.vocab_size)", word,
                    vocab_size);
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) DP_THROW_USER("dptrain sample: --prompt-ids holds no token id");
  return ids;
}

int32_t sample_token(const float* logits, int64_t V, double temperature, int64_t top_k, double u) {
  std::vector<int32_t> idx(static_cast<size_t>(V));
  std::iota(idx.begin(), idx.end(), 0);
  const int64_t k = top_k <= 0 ? V : std::min(top_k, V);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](int32_t a, int32_t b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; });
  if (temperature <= 0) return idx[0];
  const double top = logits[idx[0]];
  std::vector<double> p(static_cast<size_t>(k));
  double sum = 0;
  for (int64_t j = 0; j < k; ++j) sum += p[j] = std::exp((logits[idx[j]] - top) / temperature);
  double acc = 0;
  for (int64_t j = 0; j < k; ++j) {
    acc += p[j] / sum;
    if (u < acc) return idx[j];
  }
  return idx[k - 1];  // u within rounding of 1
}

std::vector<std::vector<int32_t>> generate(Graph& model, const std::vector<int32_t>& prompt, const SampleOptions& o) {
  // V classes in rows of ld (a padded LM head's rows are longer: models::output_width).
  const int64_t T = model.input_shape().at(0), V = models::output_width(model), ld = model.output_shape().back();
  const int64_t S = o.samples;
  std::vector<std::vector<int32_t>> seqs(static_cast<size_t>(S), prompt);
  std::vector<Rng> rng;
  for (int64_t s = 0; s < S; ++s) rng.emplace_back(o.seed, static_cast<uint64_t>(s));
  Tensor x = Tensor::zeros({S, T}, DType::I32);
  const StepContext ctx{false, o.seed, 0};
  for (int64_t t = 0; t < o.tokens; ++t) {
    const int64_t len = static_cast<int64_t>(seqs[0].size()), w = std::min(len, T);
    for (int64_t s = 0; s < S; ++s) {
      int32_t* row = x.data<int32_t>() + s * T;
      std::fill(row, row + T, 0);
      std::copy(seqs[s].end() - w, seqs[s].end(), row);
    }
    const Tensor& logits = model.forward(ctx, x);  // (S, T, ld)
    for (int64_t s = 0; s < S; ++s) {
      const float* row = logits.data<float>() + (s * T + w - 1) * ld;
      seqs[s].push_back(sample_token(row, V, o.temperature, o.top_k, static_cast<double>(rng[s].uniform())));
    }
  }
  return seqs;
}

namespace {

void print_sample(const std::vector<int32_t>& seq, int64_t vocab_size, int64_t index, int64_t count) {
  if (count > 1) std::printf("%s--- sample %lld\n", index ? "\n" : "", static_cast<long long>(index + 1));
  if (vocab_size == 256) {
    std::string text(seq.begin(), seq.end());
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
    return;
  }
  for (size_t i = 0; i < seq.size(); ++i) std::printf("%s%d", i ? " " : "", seq[i]);
  std::printf("\n");
}

}  // namespace

int run_sample(const Config& cfg, const SampleOptions& o) {
  if (cfg.model.preset != PresetKind::Gpt2)
    DP_THROW_USER("dptrain sample continues text with a GPT model: {} has model.preset = \"{}\"; use a cfg with "
                  "model.preset = \"gpt2\"",
                  cfg.source, enum_name(cfg.model.preset));
  if (o.tokens < 0 || o.samples < 1 || o.top_k < 0 || !(o.temperature >= 0))
    DP_THROW_USER("dptrain sample: --tokens >= 0, --samples >= 1, --top-k >= 0 and --temperature >= 0 are needed");
  const std::vector<int32_t> prompt = prompt_tokens(o, cfg.model.vocab_size);
  set_cpu_threads(cfg.train.threads);
  const int64_t T = std::min<int64_t>(cfg.model.block_size, static_cast<int64_t>(prompt.size()) + o.tokens);
  auto model = models::build_model(cfg.model, {std::max<int64_t>(T, 1)}, static_cast<uint64_t>(cfg.run.seed));
  model->set_cpu_backend(cfg.train.cpu_backend);
  const WeightsLoad w = load_weights(o.weights, *model, {}, "Check that the cfg builds the model these weights are of "
                                     "(model.n_layer, n_head, n_embd, block_size, vocab_size, bias)",
                                     models::weights_translator(cfg.model));
  log::get("sample")->info("weights {} ({}{}); {} sample(s) of {} tokens after a {}-token prompt, temperature {}, "
                           "top-k {}, seed {}",
                           w.path, weights_kind_name(w.kind), w.translated.empty() ? "" : ", read as " + w.translated,
                           o.samples, o.tokens, prompt.size(), o.temperature, o.top_k, o.seed);
  const auto seqs = generate(*model, prompt, o);
  for (size_t s = 0; s < seqs.size(); ++s)
    print_sample(seqs[s], cfg.model.vocab_size, static_cast<int64_t>(s), static_cast<int64_t>(seqs.size()));
  std::fflush(stdout);
  return 0;
}

}  // namespace dp::launch
