// defines: helpers of the data tests: TempDir (a fresh folder, removed at the end) and user_error
// (the message of the UserError a call throws, "no error" when it throws none).
#pragma once
#include <unistd.h>

#include <filesystem>
#include <string>

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

}  // namespace dp::data::testing
