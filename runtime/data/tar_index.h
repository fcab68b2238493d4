// defines: the index of one tar shard in the WebDataset convention — TarSample (a sample: its
// key, where its image lies in the shard, its label), index_tar_shard (built once by walking the
// tar headers) — and its cache file beside the run (load_tar_index / save_tar_index), so that a
// sample is one pread and the sampler can visit samples in any order.
//
// WebDataset: the members of a sample are consecutive and share a key, the member path up to
// the first dot of its file name ("n01440764/x_00001.JPEG" -> key "n01440764/x_00001", extension
// "jpeg", lower-cased); images are <key>.jpg/.jpeg/.png, labels <key>.cls (a decimal integer) or
// <key>.json (an object with an integer "label"); other members are ignored.
//
// The tar reader checks every header (checksum; ustar, GNU long names, pax path/size records) and
// that every member lies inside the file: a truncated shard is a UserError naming it. A sample
// without an image, or with a label that does not parse, is a "problem" (kept in the index, with the
// reason); one without a label member has label -1. The data set turns both into errors, or
// leaves them out with data.skip_bad.
//
// Index file (version 1, little-endian): "DPTARIDX", u32 version, u64 shard size, i64 shard
// mtime (ns), u32 samples, u32 problems; per sample u64 offset, u64 size, i32 label, u32 key
// length, key; per problem u32 length, text; u32 CRC-32C of all before. It is used only when
// the shard's size and mtime match, so a changed shard is indexed again.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/data/raw_file.h"

namespace dp::data {

struct TarSample {
  std::string key;
  uint64_t offset = 0, size = 0;  // the image member's bytes in the shard
  int32_t label = -1;             // -1: no label member (an error for training, fine for prediction)
};

struct TarShardIndex {
  std::vector<TarSample> samples;     // in member order
  std::vector<std::string> problems;  // samples left out, one message each (naming shard and key)
};

// Throws UserError for a corrupt or truncated shard.
TarShardIndex index_tar_shard(const RawFile& shard);

// <dir>/<file name of the shard>-<16 hex digits of a hash of its absolute path>.idx
std::string tar_index_path(const std::string& dir, const std::string& shard_path);

// The cached index of `shard` in `file`: false when missing, of another version, stale (size or
// mtime differ) or corrupt (CRC).
bool load_tar_index(const std::string& file, const RawFile& shard, TarShardIndex& out);
// Atomically (temporary file, rename): concurrent writers of the same index are harmless.
void save_tar_index(const std::string& file, const RawFile& shard, const TarShardIndex& index);

}  // namespace dp::data
