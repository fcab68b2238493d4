#include "runtime/data/token_dataset.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "runtime/data/shard_paths.h"
#include "runtime/data/token_shard.h"
#include "runtime/data/token_windows.h"

namespace dp::data {
namespace {

class TokenShardsDataset final : public Dataset {
 public:
  TokenShardsDataset(std::string pattern, std::vector<std::unique_ptr<MappedTokenShard>> shards,
                     const TokenShardsOptions& o)
      : pattern_(std::move(pattern)), shards_(std::move(shards)), o_(o) {
    std::vector<int64_t> tokens;
    for (const auto& s : shards_) tokens.push_back(s->num_tokens()), total_tokens_ += s->num_tokens();
    index_ = WindowIndex(tokens, o_.block_size);
  }
  int64_t size() const override { return index_.size(); }
  Shape sample_shape() const override { return {o_.block_size}; }
  int num_classes() const override { return static_cast<int>(o_.vocab_size); }
  int32_t get(int64_t, float*) const override {
    throw DpError(fmt::format("{}: token windows are read with get_tokens, not as floats [{}]", describe(),
                              identity_string()));
  }
  std::string describe() const override {
    return fmt::format("token shards {} ({} shard{}, {} tokens): {} windows of {} + 1 tokens, vocabulary {}", pattern_,
                       shards_.size(), shards_.size() == 1 ? "" : "s", total_tokens_, size(), o_.block_size,
                       o_.vocab_size);
  }
  std::string sample_name(int64_t index) const override {
    const WindowPlace p = index_.place(index);
    return fmt::format("{}@{}", shards_[p.shard]->path(), p.offset);
  }
  bool holds_tokens() const override { return true; }
  void get_tokens(int64_t index, uint16_t* out) const override {
    const WindowPlace p = index_.place(index);
    const MappedTokenShard& s = *shards_[p.shard];
    const int64_t n = o_.block_size + 1;
    std::memcpy(out, s.tokens() + p.offset, static_cast<size_t>(n) * sizeof(uint16_t));
    const uint16_t* top = std::max_element(out, out + n);
    if (*top >= o_.vocab_size) {
      const int64_t at = p.offset + (top - out);
      DP_THROW_USER("{}: token {} at token {} of the shard (window {} of the data set) is not below model.vocab_size "
                    "= {}: the shards were made with a larger vocabulary; set model.vocab_size to at least {} (or "
                    "the tokenizer's vocabulary size)",
                    s.path(), *top, at, index, o_.vocab_size, *top + 1);
    }
  }

 private:
  std::string pattern_;
  std::vector<std::unique_ptr<MappedTokenShard>> shards_;
  TokenShardsOptions o_;
  WindowIndex index_;
  int64_t total_tokens_ = 0;
};

}  // namespace

std::unique_ptr<Dataset> open_token_shards(const std::string& pattern, const TokenShardsOptions& o) {
  if (o.block_size < 1) DP_THROW_USER("model.block_size = {}: token windows need a block size of at least 1", o.block_size);
  if (o.vocab_size < 1 || o.vocab_size > 65536)
    DP_THROW_USER("model.vocab_size = {}: token shards hold uint16 tokens, so the vocabulary must be 1..65536",
                  o.vocab_size);
  std::vector<std::unique_ptr<MappedTokenShard>> shards;
  for (const std::string& path : shard_paths(pattern, o.key)) {
    auto s = std::make_unique<MappedTokenShard>(path);
    if (windows_in_shard(s->num_tokens(), o.block_size) == 0)
      DP_THROW_USER("{}: {} tokens, fewer than model.block_size + 1 = {}: not one window of the model's context fits "
                    "in this shard (windows never cross shards); {}leave the shard out of {}",
                    path, s->num_tokens(), o.block_size + 1,
                    s->num_tokens() >= 2 ? fmt::format("lower model.block_size to at most {} or ", s->num_tokens() - 1)
                                         : std::string(),
                    o.key);
    shards.push_back(std::move(s));
  }
  return std::make_unique<TokenShardsDataset>(pattern, std::move(shards), o);
}

void scan_token_vocabulary(const Dataset& ds) {
  DP_CHECK(ds.holds_tokens(), "scan_token_vocabulary of {}", ds.describe());
  std::vector<uint16_t> w(static_cast<size_t>(ds.window_tokens()));
  for (int64_t i = 0; i < ds.size(); ++i) ds.get_tokens(i, w.data());
}

}  // namespace dp::data
