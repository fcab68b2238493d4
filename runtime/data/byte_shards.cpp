#include "runtime/data/byte_shards.h"

#include <filesystem>

#include <fmt/format.h>

#include "base/error.h"
#include "runtime/data/raw_file.h"
#include "runtime/data/token_shard.h"

namespace dp::data {
namespace {

// Bytes [begin, end) of the input as shards <out_dir>/<split>_NNNNNN.bin of at most shard_tokens.
std::vector<std::string> write_split(const RawFile& in, uint64_t begin, uint64_t end, const std::string& out_dir,
                                     const std::string& split, int64_t shard_tokens) {
  std::vector<std::string> files;
  std::vector<uint8_t> bytes;
  std::vector<uint16_t> tokens;
  for (uint64_t at = begin; at < end; at += static_cast<uint64_t>(shard_tokens)) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(static_cast<uint64_t>(shard_tokens), end - at));
    bytes = in.read(at, n, fmt::format("{} shard {}", split, files.size()));
    tokens.assign(bytes.begin(), bytes.end());  // a byte is its own token
    const std::string path = fmt::format("{}/{}_{:06d}.bin", out_dir, split, files.size());
    write_token_shard(path, tokens);
    files.push_back(path);
  }
  return files;
}

}  // namespace

ByteShards make_byte_shards(const std::string& input, const std::string& out_dir, const ByteShardsOptions& o) {
  if (!(o.val_fraction > 0 && o.val_fraction < 1))
    DP_THROW_USER("--val-fraction {}: the evaluation split's share of the bytes must be between 0 and 1 (e.g. 0.1)",
                  o.val_fraction);
  if (o.shard_tokens < 1 || o.shard_tokens > INT32_MAX)
    DP_THROW_USER("--shard-tokens {}: tokens per shard must be 1..{} (the header's count is an int32)", o.shard_tokens,
                  INT32_MAX);
  const RawFile in(input);
  const uint64_t n = in.size();
  const auto val = static_cast<uint64_t>(static_cast<double>(n) * o.val_fraction + 0.5);
  if (n < 2 || val == 0 || val == n)
    DP_THROW_USER("{}: {} bytes, too few for a training and an evaluation split with --val-fraction {} (each needs at "
                  "least one byte, and a model of block size T needs T + 1 per shard)",
                  input, n, o.val_fraction);
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) DP_THROW_USER("--out {}: cannot create the folder ({})", out_dir, ec.message());
  ByteShards r;
  r.train_tokens = static_cast<int64_t>(n - val);
  r.val_tokens = static_cast<int64_t>(val);
  r.train = write_split(in, 0, n - val, out_dir, "train", o.shard_tokens);
  r.val = write_split(in, n - val, n, out_dir, "val", o.shard_tokens);
  return r;
}

}  // namespace dp::data
