#include "runtime/data/shard_paths.h"

#include <glob.h>

#include <filesystem>

#include "base/error.h"
#include "runtime/data/brace.h"

namespace dp::data {
namespace {

bool has_wildcard(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

// glob(3)'s matches of one name, sorted (GLOB_NOSORT is not given); empty when nothing matches.
std::vector<std::string> glob_files(const std::string& name, const std::string& key, const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(name.c_str(), GLOB_ERR, nullptr, &g);
  std::vector<std::string> out;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  if (rc != 0 && rc != GLOB_NOMATCH)
    DP_THROW_USER("{} = \"{}\": cannot list the files of '{}' ({})", key, pattern, name,
                  rc == GLOB_ABORTED ? "a folder could not be read" : "out of memory");
  return out;
}

}  // namespace

std::vector<std::string> shard_paths(const std::string& pattern, const std::string& key) {
  if (pattern.empty())
    DP_THROW_USER("{} is empty: give the shard files (a file, a brace pattern such as \"train_{{000001..000009}}.bin\" "
                  "or a glob such as \"train_*.bin\")",
                  key);
  std::vector<std::string> out;
  for (const std::string& name : expand_braces(pattern)) {
    if (has_wildcard(name)) {
      const std::vector<std::string> m = glob_files(name, key, pattern);
      if (m.empty()) DP_THROW_USER("{} = \"{}\": no file matches '{}'", key, pattern, name);
      out.insert(out.end(), m.begin(), m.end());
      continue;
    }
    std::error_code ec;
    if (!std::filesystem::is_regular_file(name, ec))
      DP_THROW_USER("{} = \"{}\": {}: no such shard{}", key, pattern, name,
                    std::filesystem::is_directory(name, ec) ? " (a folder)" : "");
    out.push_back(name);
  }
  return out;
}

}  // namespace dp::data
