// defines: make_byte_shards, `dptrain make-shards`: any file as byte-level token shards (each byte
// one token, vocabulary 256) in llm.c's format (runtime/data/token_shard.h), split into training
// and evaluation shards, so a language model can be tried without a tokenizer. As nanoGPT's
// shakespeare_char split: the first (1 - val_fraction) of the bytes train, the rest evaluate.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dp::data {

struct ByteShardsOptions {
  double val_fraction = 0.1;              // the evaluation split's share of the bytes, in (0, 1)
  int64_t shard_tokens = 100'000'000;     // tokens per shard at most (llm.c's FineWeb shards: 1e8)
};

struct ByteShards {
  std::vector<std::string> train, val;    // the files written, in order
  int64_t train_tokens = 0, val_tokens = 0;
};

// Writes <out_dir>/train_000000.bin, train_000001.bin, ... and <out_dir>/val_000000.bin, ...
// (out_dir is created; existing shards of those names are replaced). UserError naming the file or
// option for a missing or empty input, a fraction outside (0, 1), a split without a token, and a
// folder that cannot be written.
ByteShards make_byte_shards(const std::string& input, const std::string& out_dir, const ByteShardsOptions& o = {});

}  // namespace dp::data
