// defines: RunDir, the run directory <run.dir>/<run.name>/ (config.toml, metrics.jsonl, logs/).
#pragma once
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace dp::launch {

class RunDir {
 public:
  // Creates the folders (and logs/); rank 0 writes the resolved config.
  RunDir(const std::string& root, const std::string& name);
  const std::string& path() const { return path_; }
  std::string file(const std::string& rel) const { return path_ + "/" + rel; }
  void write_text(const std::string& rel, const std::string& text) const;  // atomic (tmp + rename)
  // One JSON object per line, flushed at once (so a killed run keeps what it logged).
  void append_metrics(const nlohmann::json& j);

 private:
  std::string path_;
  std::ofstream metrics_;
};

}  // namespace dp::launch
