// defines: TempRunRoot (a fresh folder under the temp dir, removed with the object) and
// make_word_shards (byte-level token shards of a small repeated text a bigram model can learn:
// five phrases in turn, a period and a newline after every 7th): the token-training tests' data.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "runtime/data/byte_shards.h"

namespace dp::testutil {

struct TempRunRoot {
  std::string path;
  explicit TempRunRoot(const std::string& tag)
      : path((std::filesystem::temp_directory_path() / ("dptrain_" + tag + "_" + std::to_string(::getpid()))).string()) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempRunRoot() { std::filesystem::remove_all(path); }
  TempRunRoot(const TempRunRoot&) = delete;
  TempRunRoot& operator=(const TempRunRoot&) = delete;
};

// dir/text.txt (`phrases` phrases) and its shards in dir/shards (10% validation, 4000 tokens a shard).
inline void make_word_shards(const std::string& dir, int phrases) {
  std::string text;
  const char* words[] = {"the quick brown fox", "jumps over", "the lazy dog", "and the cat", "sleeps in the sun"};
  for (int i = 0; i < phrases; ++i) text += std::string(words[i % 5]) + (i % 7 == 0 ? ".\n" : " ");
  std::ofstream(dir + "/text.txt") << text;
  data::make_byte_shards(dir + "/text.txt", dir + "/shards", {.val_fraction = 0.1, .shard_tokens = 4000});
}

}  // namespace dp::testutil
