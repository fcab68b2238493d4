#include "launch/run_dir.h"

#include <cstdio>
#include <filesystem>

#include "base/error.h"

namespace dp::launch {

RunDir::RunDir(const std::string& root, const std::string& name) : path_(root + "/" + name) {
  std::error_code ec;
  std::filesystem::create_directories(path_ + "/logs", ec);
  if (ec) DP_THROW_USER("cannot create run directory '{}': {} (set run.dir to a writable folder)", path_, ec.message());
}

void RunDir::write_text(const std::string& rel, const std::string& text) const {
  const std::string dst = file(rel), tmp = dst + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    out.flush();
    if (!out) DP_THROW_USER("cannot write '{}'", tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, dst, ec);
  if (ec) DP_THROW_USER("cannot rename '{}' to '{}': {}", tmp, dst, ec.message());
}

void RunDir::append_metrics(const nlohmann::json& j) {
  if (!metrics_.is_open()) metrics_.open(file("metrics.jsonl"), std::ios::app);
  metrics_ << j.dump() << '\n';
  metrics_.flush();
}

}  // namespace dp::launch
