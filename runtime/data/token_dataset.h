// defines: open_token_shards, llm.c's token shards (runtime/data/token_shard.h) as a Dataset of
// token windows (runtime/data/token_windows.h): sample i is the i-th window of block_size + 1
// tokens in file order, read from the memory-mapped shard (no copy of a shard into memory), so the
// distributed sampler's semantics hold over windows exactly as over images.
//
// Checks: every shard's header when the data set is opened (magic, version, size: token_shard.h);
// every shard must hold at least one window (block_size + 1 tokens), else its tokens would silently
// never be seen; tokens below the vocabulary lazily, per window, as get_tokens copies it (a pass
// over the block_size + 1 tokens it copies anyway), so that opening a data set of 100 shards of
// 200 MB does not read 20 GB on every rank at every start: a bad token fails the step that reads
// it, naming the shard and the token's position. `dptrain --check` scans every token once
// (scan_token_vocabulary).
#pragma once
#include <memory>
#include <string>

#include "runtime/data/dataset.h"

namespace dp::data {

struct TokenShardsOptions {
  int64_t block_size = 0;  // T: the model's context (model.block_size)
  int64_t vocab_size = 0;  // tokens must be below it (model.vocab_size)
  std::string key = "data.path";  // the cfg key of the pattern, for messages
};

// pattern: a file, a brace pattern or a glob (runtime/data/shard_paths.h). UserError naming the
// file or key for a missing shard, an empty pattern, a bad header or a shard without a window.
std::unique_ptr<Dataset> open_token_shards(const std::string& pattern, const TokenShardsOptions& options);

// Every token of every window of `ds` (a data set of token windows) below its vocabulary: the
// first token that is not throws get_tokens' UserError. Reads every shard once.
void scan_token_vocabulary(const Dataset& ds);

}  // namespace dp::data
