// defines: llm.c's token shard format (dev/data/data_common.py write_datafile, llmc/dataloader.h):
// a header of 256 little-endian int32 — magic 20240520, version 1, the token count — then the
// tokens as uint16. MappedTokenShard (one shard memory-mapped read-only: a multi-GB shard is paged
// in as its windows are read, never copied whole into memory), check_token_shard_header (the pure
// check of the header against the file size) and write_token_shard (the writer, for the byte-level
// tool and the tests).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace dp::data {

inline constexpr int32_t kTokenShardMagic = 20240520;
inline constexpr int32_t kTokenShardVersion = 1;  // uint16 tokens (llm.c's version 2 holds uint8 bytes of text)
inline constexpr size_t kTokenShardHeaderInts = 256;
inline constexpr size_t kTokenShardHeaderBytes = kTokenShardHeaderInts * sizeof(int32_t);  // 1024

// The token count of a shard whose first bytes are `header` (at least kTokenShardHeaderBytes) and
// whose size is file_bytes. Throws UserError naming `path` for: a file shorter than the header, a
// wrong magic, a wrong version, a negative count, a count whose tokens the file does not hold
// (truncated) and a file longer than header + tokens.
int64_t check_token_shard_header(const std::string& path, const uint8_t* header, uint64_t file_bytes);

// One shard, mapped read-only for as long as the object lives (munmap and close in the destructor).
class MappedTokenShard {
 public:
  // Opens, checks the header (check_token_shard_header) and maps the file. UserError naming the
  // path when it cannot be opened or is not a valid shard.
  explicit MappedTokenShard(const std::string& path);
  ~MappedTokenShard();
  MappedTokenShard(const MappedTokenShard&) = delete;
  MappedTokenShard& operator=(const MappedTokenShard&) = delete;

  const std::string& path() const { return path_; }
  int64_t num_tokens() const { return num_tokens_; }
  // The tokens (num_tokens() of them), in the mapping.
  const uint16_t* tokens() const { return tokens_; }

 private:
  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const uint16_t* tokens_ = nullptr;
  int64_t num_tokens_ = 0;
};

// Writes `tokens` as a shard at `path` (replacing it): the header, then the tokens, written to a
// temporary file beside it and renamed, so a reader never sees half a shard. UserError naming the
// path when it cannot be written.
void write_token_shard(const std::string& path, std::span<const uint16_t> tokens);

}  // namespace dp::data
