// defines: make_synthetic_tokens (declared in dataset.h), synthetic token windows for a model that
// takes tokens (data.dataset = "synthetic" with model.preset = "gpt2"): a data set of token
// windows (holds_tokens()) like llm.c's token shards (token_dataset.h), computed on the fly.
//
// Window i of a seed is a pure function of (seed, i), no memory per window: its block_size + 1
// tokens are the first words of keyed_rng(seed, kStreamData, i), each mapped into [0, vocab) by
// kernels/synthetic_math.h's synthetic_token_of (multiply-shift). The tokens are independent and
// uniform, so nothing is learnable: a model's best loss is ln(vocab), which makes the data a
// benchmark's and a plumbing test's, not a learning test's. The GPU generator
// (kernels/cuda/synthetic.h synthetic_token_windows, data.synthetic_device = "cuda") computes word
// j by position, this file draws the stream in order with Rng: both give the same tokens.
#include <vector>

#include "base/error.h"
#include "kernels/synthetic_math.h"
#include "runtime/data/dataset.h"
#include "runtime/data/keyed_rng.h"

namespace dp::data {
namespace {

constexpr int64_t kMaxWindows = static_cast<int64_t>(kernels::kSyntheticPatternId);  // the image set's stream ids
constexpr int64_t kMaxVocab = 65536;  // tokens are uint16, as in token shards

class SyntheticTokens final : public Dataset {
 public:
  SyntheticTokens(int64_t n, int64_t block_size, int64_t vocab, uint64_t seed)
      : n_(n), block_size_(block_size), vocab_(vocab), seed_(seed) {}

  int64_t size() const override { return n_; }
  Shape sample_shape() const override { return {block_size_}; }
  int num_classes() const override { return static_cast<int>(vocab_); }
  int32_t get(int64_t, float*) const override {
    throw DpError(fmt::format("{}: token windows are read with get_tokens, not as floats [{}]", describe(),
                              identity_string()));
  }
  std::string describe() const override {
    return fmt::format("synthetic tokens (seed {}): {} windows of {} + 1 tokens, vocabulary {}", seed_, n_, block_size_,
                       vocab_);
  }
  bool holds_tokens() const override { return true; }
  // block_size + 1 tokens: word j of the window's stream is token j.
  void get_tokens(int64_t index, uint16_t* out) const override {
    DP_CHECK(index >= 0 && index < n_, "window index {} out of range [0, {}) in {}", index, n_, describe());
    Rng rng = keyed_rng(seed_, kStreamData, static_cast<uint64_t>(index));
    for (int64_t j = 0; j <= block_size_; ++j)
      out[j] = static_cast<uint16_t>(kernels::synthetic_token_of(rng.next_u32(), static_cast<uint64_t>(vocab_)));
  }

 private:
  int64_t n_, block_size_, vocab_;
  uint64_t seed_;
};

}  // namespace

std::unique_ptr<Dataset> make_synthetic_tokens(int64_t n, int64_t block_size, int64_t vocab_size, uint64_t seed) {
  if (n < 0 || n >= kMaxWindows)
    DP_THROW_USER("{} synthetic token windows (data.synthetic_train + data.synthetic_eval): the count must be in [0, "
                  "2^55); lower data.synthetic_train or data.synthetic_eval",
                  n);
  if (block_size < 1)
    DP_THROW_USER("model.block_size = {}: token windows need a block size of at least 1", block_size);
  if (vocab_size < 1 || vocab_size > kMaxVocab)
    DP_THROW_USER("model.vocab_size = {}: synthetic token windows hold uint16 tokens, as token shards do, so the "
                  "vocabulary must be 1..65536",
                  vocab_size);
  return std::make_unique<SyntheticTokens>(n, block_size, vocab_size, seed);
}

}  // namespace dp::data
