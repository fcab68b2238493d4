#include "runtime/data/token_windows.h"

#include <algorithm>

#include "base/error.h"

namespace dp::data {

int64_t windows_in_shard(int64_t num_tokens, int64_t block_size) {
  DP_CHECK(block_size >= 1, "token windows of block size {}", block_size);
  return num_tokens > block_size ? (num_tokens - 1) / block_size : 0;
}

WindowIndex::WindowIndex(const std::vector<int64_t>& shard_tokens, int64_t block_size) : block_(block_size) {
  first_.reserve(shard_tokens.size() + 1);
  first_.push_back(0);
  for (int64_t n : shard_tokens) first_.push_back(first_.back() + windows_in_shard(n, block_size));
}

WindowPlace WindowIndex::place(int64_t w) const {
  DP_CHECK(w >= 0 && w < size(), "token window {} outside [0, {})", w, size());
  // The last shard whose first window is <= w (shards without windows share their successor's).
  const auto it = std::upper_bound(first_.begin(), first_.end(), w);
  const int32_t shard = static_cast<int32_t>(it - first_.begin()) - 1;
  return {shard, (w - first_[shard]) * block_};
}

}  // namespace dp::data
