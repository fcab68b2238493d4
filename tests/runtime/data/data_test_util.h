// defines: helpers of the data tests: TempDir (a fresh folder, removed at the end), user_error
// (the message of the UserError a call throws, "no error" when it throws none), write (a file's
// bytes, its folders made), text and tar_of (a ustar archive in memory).
#pragma once
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"

namespace dp::data::testing {

struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix = "dp-test-data") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

template <typename F>
std::string user_error(F&& f) {
  try {
    f();
  } catch (const dp::UserError& e) {
    return e.what();
  }
  return "no error";
}

inline void write(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                              static_cast<std::streamsize>(bytes.size()));
}
inline std::vector<uint8_t> text(const std::string& s) { return {s.begin(), s.end()}; }

// A ustar archive of (name, bytes) members, with the two zero blocks at the end.
inline std::vector<uint8_t> tar_of(const std::vector<std::pair<std::string, std::vector<uint8_t>>>& members) {
  std::vector<uint8_t> out;
  for (const auto& [name, data] : members) {
    uint8_t h[512] = {};
    std::memcpy(h, name.data(), std::min<size_t>(name.size(), 100));
    std::snprintf(reinterpret_cast<char*>(h + 100), 8, "%07o", 0644);
    std::snprintf(reinterpret_cast<char*>(h + 124), 12, "%011o", static_cast<unsigned>(data.size()));
    std::snprintf(reinterpret_cast<char*>(h + 136), 12, "%011o", 0u);
    h[156] = '0';
    std::memcpy(h + 257, "ustar\0" "00", 8);
    std::memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (uint8_t b : h) sum += b;
    std::snprintf(reinterpret_cast<char*>(h + 148), 8, "%06o", sum);
    out.insert(out.end(), h, h + 512);
    out.insert(out.end(), data.begin(), data.end());
    out.resize((out.size() + 511) / 512 * 512, 0);
  }
  out.resize(out.size() + 1024, 0);
  return out;
}

}  // namespace dp::data::testing
