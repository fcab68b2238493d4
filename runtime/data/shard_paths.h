// defines: shard_paths, a data key's shard files from what a user writes: one file, a brace pattern
// ("train-{000000..000146}.bin", runtime/data/brace.h) or a glob ("fineweb_train_*.bin", glob(3)),
// or both (braces first, then each name with a wildcard is globbed, its matches sorted by name).
#pragma once
#include <string>
#include <vector>

namespace dp::data {

// The files, in pattern order (a glob's matches sorted). `key` names the cfg key in messages
// ("data.path"). Throws UserError naming the key and the pattern for an empty pattern, a glob that
// matches nothing and a named file that does not exist (or is a folder).
std::vector<std::string> shard_paths(const std::string& pattern, const std::string& key);

}  // namespace dp::data
