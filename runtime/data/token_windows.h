// defines: the windows of token shards, as pure arithmetic: a shard of n tokens with block size T
// has windows starting at 0, T, 2T, ... each of T + 1 tokens (inputs: the first T, targets: the last
// T), as long as the window lies inside the shard: floor((n - 1) / T) of them. Windows never cross a
// shard boundary. WindowIndex numbers the windows of a list of shards in file order (shard 0's
// first) and finds a window's shard and first token.
#pragma once
#include <cstdint>
#include <vector>

namespace dp::data {

// floor((n - 1) / T) for n > T, else 0. block_size >= 1.
int64_t windows_in_shard(int64_t num_tokens, int64_t block_size);

struct WindowPlace {
  int32_t shard = 0;   // index into the shard list
  int64_t offset = 0;  // the window's first token in its shard: (window within the shard) * T
};

class WindowIndex {
 public:
  WindowIndex() = default;
  // The token counts of the shards, in file order, and the block size T (>= 1).
  WindowIndex(const std::vector<int64_t>& shard_tokens, int64_t block_size);
  int64_t size() const { return first_.empty() ? 0 : first_.back(); }
  int64_t windows_of(int32_t shard) const { return first_[shard + 1] - first_[shard]; }
  // Window `w` in [0, size()): its shard and first token (binary search over the shards).
  WindowPlace place(int64_t w) const;

 private:
  int64_t block_ = 1;
  std::vector<int64_t> first_;  // (shards + 1): the global number of each shard's first window; last: the total
};

}  // namespace dp::data
