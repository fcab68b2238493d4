// defines: run_sample, the `dptrain sample` command: a GPT model built from the cfg (model.preset
// = "gpt2") with the weights of --weights continues a prompt for --tokens tokens, with a
// temperature and top-k, deterministic for --seed; and the pure parts behind it (the prompt's
// tokens, one sampling decision, the generation loop).
//
// The model is built once for a context of min(block_size, prompt + tokens) positions; each new
// token is one forward of the last context-length tokens (padded after the end: the attention is
// causal, so the padding cannot reach the position read) and a draw from its logits at the
// last real position. Past block_size tokens the window slides, as nanoGPT's generate crops.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/config.h"
#include "runtime/graph.h"

namespace dp::launch {

struct SampleOptions {
  std::string weights;      // --weights (any file model.init takes, Hugging Face GPT-2 included)
  std::string prompt;       // --prompt: text, for a byte-level model (vocab_size 256)
  std::string prompt_ids;   // --prompt-ids: token ids "15496, 11, 995"
  int64_t tokens = 200;     // --tokens: new tokens per sample
  double temperature = 1.0; // --temperature: logits / temperature; 0 = the most likely token
  int64_t top_k = 0;        // --top-k: draw among the k most likely (0 = all)
  int64_t samples = 1;      // --samples: continuations of the prompt, drawn side by side
  uint64_t seed = 0;        // --seed
};

// Exit status (0) or throws UserError. Prints each sample (the prompt and its continuation: text
// for a byte-level model, token ids otherwise) on stdout.
int run_sample(const Config& cfg, const SampleOptions& options);

// Pure. The prompt's token ids: prompt_ids parsed ("1,2 3": commas or spaces) or the prompt's
// bytes (vocab_size must be 256). UserError for neither or both, an id outside [0, vocab_size)
// or a text prompt for a model that is not byte-level.
std::vector<int32_t> prompt_tokens(const SampleOptions& o, int64_t vocab_size);

// Pure. One token from a row of V logits: the top_k largest (ties to the lower id; 0 = all), over
// temperature, softmax in f64, then the first id whose cumulative probability exceeds u in
// [0, 1). temperature 0: the most likely id (the lowest among equals).
int32_t sample_token(const float* logits, int64_t V, double temperature, int64_t top_k, double u);

// The generation loop on a built GPT graph (input [T] ids, output [T, V] logits): `samples`
// continuations of `prompt` by `tokens` tokens each, the draws from Rng(seed, sample).
std::vector<std::vector<int32_t>> generate(Graph& model, const std::vector<int32_t>& prompt, const SampleOptions& o);

}  // namespace dp::launch
