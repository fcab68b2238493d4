#include "runtime/checkpoint/checkpoint_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "runtime/log.h"

namespace dp {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPrefix = "step-";
constexpr const char* kSuffix = ".safetensors";

// The step of "step-<digits>.safetensors", or -1.
int64_t step_of(const std::string& name) {
  const size_t pre = std::strlen(kPrefix), suf = std::strlen(kSuffix);
  if (name.size() <= pre + suf || name.compare(0, pre, kPrefix) != 0 ||
      name.compare(name.size() - suf, suf, kSuffix) != 0)
    return -1;
  const std::string digits = name.substr(pre, name.size() - pre - suf);
  if (digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  return std::stoll(digits);
}

void fsync_path(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) DP_THROW_USER("cannot open '{}' to fsync: {}", path, std::strerror(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) DP_THROW_USER("fsync of '{}' failed: {}", path, std::strerror(err));
}

// tmp, fsync, rename, fsync the directory: `latest` is always a whole name.
void write_small_file(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string dst = dir + "/" + name, tmp = dst + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    out.flush();
    if (!out) DP_THROW_USER("cannot write '{}'", tmp);
  }
  fsync_path(tmp, O_RDONLY);
  std::error_code ec;
  fs::rename(tmp, dst, ec);
  if (ec) DP_THROW_USER("cannot rename '{}' to '{}': {}", tmp, dst, ec.message());
  fsync_path(dir, O_RDONLY | O_DIRECTORY);
}

}  // namespace

CheckpointDir::CheckpointDir(std::string dir) : dir_(std::move(dir)) {}

std::string CheckpointDir::file_for(int64_t step) const {
  return fmt::format("{}/{}{:08}{}", dir_, kPrefix, step, kSuffix);
}

std::vector<CheckpointDir::Entry> CheckpointDir::list() const {
  std::vector<Entry> out;
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    const int64_t step = step_of(e.path().filename().string());
    if (step >= 0 && e.is_regular_file(ec)) out.push_back({step, e.path().string()});
  }
  if (ec) DP_THROW_USER("cannot list checkpoint folder '{}': {}", dir_, ec.message());
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.step > b.step; });
  return out;
}

std::string CheckpointDir::latest() const {
  std::ifstream in(dir_ + "/latest");
  std::string name;
  if (in) std::getline(in, name);
  return name;
}

void CheckpointDir::prepare() const {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) DP_THROW_USER("cannot create checkpoint folder '{}': {}", dir_, ec.message());
  for (const auto& e : fs::directory_iterator(dir_, ec))
    if (e.path().extension() == ".tmp") fs::remove(e.path(), ec);
}

void CheckpointDir::commit(int64_t step, int64_t keep) const {
  const std::string file = file_for(step);
  write_small_file(dir_, "latest", fs::path(file).filename().string() + "\n");
  if (keep <= 0) return;
  auto all = list();
  for (size_t i = static_cast<size_t>(keep); i < all.size(); ++i) {
    std::error_code ec;
    fs::remove(all[i].path, ec);
    if (ec) log::get("ckpt")->warn("cannot delete old checkpoint '{}': {}", all[i].path, ec.message());
  }
}

int CheckpointDir::remove_all() const {
  int n = 0;
  std::error_code ec;
  for (const auto& e : list()) n += fs::remove(e.path, ec) ? 1 : 0;
  fs::remove(dir_ + "/latest", ec);
  return n;
}

std::vector<std::string> CheckpointDir::move_above(int64_t step, const std::string& sub) const {
  std::vector<std::string> moved;
  for (const auto& e : list()) {
    if (e.step <= step) continue;
    std::error_code ec;
    fs::create_directories(dir_ + "/" + sub, ec);
    const std::string name = fs::path(e.path).filename().string();
    if (!ec) fs::rename(e.path, dir_ + "/" + sub + "/" + name, ec);
    if (ec) DP_THROW_USER("cannot move checkpoint '{}' into '{}/{}': {}", e.path, dir_, sub, ec.message());
    moved.push_back(name);
  }
  return moved;
}

std::optional<ResumePoint> resume_latest(const CheckpointDir& dir, Graph& model, optim::Optimizer& opt,
                                         const std::vector<optim::ArenaPiece>& pieces) {
  auto lg = log::get("ckpt");
  const auto entries = dir.list();
  if (entries.empty()) return std::nullopt;
  ResumePoint r;
  for (const auto& e : entries) {
    try {
      r.meta = load_checkpoint(e.path, model, opt, pieces);
      r.path = e.path;
      return r;
    } catch (const UserError& err) {
      r.skipped.push_back({e.path, err.what()});
      lg->warn("cannot resume from {}: {}", e.path, err.what());
    }
  }
  // One line: every reason is in the warnings above; the newest one's is repeated here.
  DP_THROW_USER("none of the {} checkpoints in '{}' can be resumed (each reason is logged above); the newest: {}; fix "
                "or remove them, or start over with --reset (or checkpoint.resume = false)",
                entries.size(), dir.path(), r.skipped.front().reason);
}

}  // namespace dp
