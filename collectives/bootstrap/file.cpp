// The file bootstrap: rendezvous through a directory every rank sees (file:///shared/dir, e.g. on
// NFS or Lustre), for launchers that give rank and size but no store (srun without a PMI plugin
// and no reachable port, or batch systems without Slurm).
//
// allgather #s: rank r writes <dir>/<s>.<r> atomically (a hidden temporary file, then rename,
// so a reader sees all of it or nothing) and polls (1 ms doubling to 64 ms) until every <s>.<q>
// exists, logging every DPTRAIN_RENDEZVOUS_REPORT_S seconds which ranks it still waits for. A file is a header line then the blob:
//     dptrain-bootstrap-file 1 world=<N> launch=<id>\n<blob bytes>
// The world size makes a disagreement between ranks a clear error; the launch id (DPTRAIN_RUN_ID,
// else SLURM_JOB_ID.SLURM_STEP_ID, else TORCHELASTIC_RUN_ID, else empty) makes files left by
// another launch in the same directory invisible.
//
// Cleanup: after round s completes, rank r deletes its <s-1>.<r> (every rank has read round s-1
// by then: it wrote round s only after reading s-1). Each rank's last file stays behind (no rank
// can tell when the others have read it); a new launch deletes its own rank's leftovers when it
// starts. Give each launch its own directory (file:///shared/rdv/$SLURM_JOB_ID) and remove it
// after the job: without a launch id, a rank could otherwise read an earlier launch's first-round
// file in the moment before that rank's new process replaces it.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "collectives/bootstrap/file.h"
#include "collectives/bootstrap/job_token.h"
#include "base/error.h"
#include "runtime/log.h"
#include "runtime/suggest.h"

namespace dp {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kMagic = "dptrain-bootstrap-file";
constexpr int kVersion = 1;

std::string sys_error(int err) { return fmt::format("{} (errno {})", std::strerror(err), err); }

class FileBootstrap final : public BootstrapBase {
 public:
  FileBootstrap(const std::string& dir, const LaunchInfo& info, double timeout_s, std::string launch_id,
                const std::string& host, std::string token, double report_s)
      : BootstrapBase(info, std::move(token)), dir_(dir), timeout_s_(timeout_s), report_s_(report_s),
        launch_id_(std::move(launch_id)) {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec) DP_THROW_USER("{}: cannot create the rendezvous directory '{}': {}", who_, dir_, ec.message());
    remove_own_leftovers();
    settle_topology(host);
  }

  const char* kind() const override { return "file"; }

  std::vector<std::string> allgather(const std::string& mine) override {
    const uint64_t seq = seq_++;
    write_mine(seq, mine);
    const int n = info_.size;
    std::vector<std::string> out(static_cast<size_t>(n));
    std::vector<bool> have(static_cast<size_t>(n), false);
    int missing = n;
    std::string other_launch;  // a file of another launch seen while waiting (for the message)
    const auto t0 = Clock::now();
    const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s_));
    const auto report_every = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(report_s_));
    auto next_report = t0 + report_every;
    auto backoff = std::chrono::milliseconds(1);
    while (true) {
      for (int r = 0; r < n; ++r) {
        if (have[static_cast<size_t>(r)]) continue;
        if (read_file(seq, r, out[static_cast<size_t>(r)], other_launch)) {
          have[static_cast<size_t>(r)] = true;
          --missing;
        }
      }
      if (missing == 0) break;
      std::vector<int> who_missing;
      for (int r = 0; r < n; ++r)
        if (!have[static_cast<size_t>(r)]) who_missing.push_back(r);
      if (Clock::now() >= next_report && Clock::now() < deadline) {
        log::get("coll")->info("{}", waiting_line(who_, info_.rank, who_missing, n, seq,
                                                  std::chrono::duration<double>(Clock::now() - t0).count(), timeout_s_));
        next_report += report_every;
      }
      if (Clock::now() >= deadline) {
        throw DpError(fmt::format("{}: timed out after {:g} s waiting for {} of {} in {} (no file {}.<rank> from them "
                                  "in {}{})",
                                  who_, timeout_s_, format_ranks(who_missing), n, allgather_name(seq), seq, dir_,
                                  other_launch.empty() ? "" : "; " + other_launch));
      }
      std::this_thread::sleep_for(std::min(backoff, std::chrono::duration_cast<std::chrono::milliseconds>(
                                                        deadline - Clock::now() + std::chrono::milliseconds(1))));
      backoff = std::min(backoff * 2, std::chrono::milliseconds(64));
    }
    if (seq > 0) ::unlink(path(seq - 1, info_.rank).c_str());
    return out;
  }

 private:
  std::string path(uint64_t seq, int rank) const { return fmt::format("{}/{}.{}", dir_, seq, rank); }

  void remove_own_leftovers() {
    const std::string suffix = fmt::format(".{}", info_.rank);
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) {
      const std::string name = e.path().filename().string();
      if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
        continue;
      const std::string seq = name.substr(0, name.size() - suffix.size());
      if (seq.find_first_not_of("0123456789") == std::string::npos) std::filesystem::remove(e.path(), ec);
    }
  }

  void write_mine(uint64_t seq, const std::string& blob) {
    const std::string dst = path(seq, info_.rank);
    const std::string tmp = fmt::format("{}/.{}.{}.{}.tmp", dir_, seq, info_.rank, ::getpid());
    const std::string header = fmt::format("{} {} world={} launch={}\n", kMagic, kVersion, info_.size, launch_id_);
    // 0600: the startup round carries the job token (collectives/bootstrap/job_token.h), and no
    // other user has any business reading a job's rendezvous.
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) throw DpError(fmt::format("{}: cannot create '{}': {}", who_, tmp, sys_error(errno)));
    bool ok = ::fchmod(fd, 0600) == 0;  // whatever the umask, and over a leftover's mode
    int err = ok ? 0 : errno;
    for (const std::string* part : {&header, &blob}) {
      size_t off = 0;
      while (ok && off < part->size()) {
        ssize_t w = ::write(fd, part->data() + off, part->size() - off);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
          ok = false;
          err = errno;
        } else {
          off += static_cast<size_t>(w);
        }
      }
    }
    if (::close(fd) != 0 && ok) {
      ok = false;
      err = errno;
    }
    if (ok && ::rename(tmp.c_str(), dst.c_str()) != 0) {
      ok = false;
      err = errno;
    }
    if (!ok) {
      ::unlink(tmp.c_str());
      throw DpError(fmt::format("{}: cannot write '{}': {}", who_, dst, sys_error(err)));
    }
  }

  // Reads <seq>.<rank> into blob; false while it does not exist (or belongs to another launch).
  bool read_file(uint64_t seq, int rank, std::string& blob, std::string& other_launch) const {
    const std::string p = path(seq, rank);
    int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) return false;
      throw DpError(fmt::format("{}: cannot open '{}': {}", who_, p, sys_error(errno)));
    }
    std::string data;
    char buf[1 << 16];
    while (true) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        int err = errno;
        ::close(fd);
        throw DpError(fmt::format("{}: cannot read '{}': {}", who_, p, sys_error(err)));
      }
      if (n == 0) break;
      data.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    const size_t nl = data.find('\n');
    char magic[32] = {0};
    int version = 0, world = 0, used = 0;
    const std::string header = data.substr(0, nl == std::string::npos ? 0 : nl);
    if (nl == std::string::npos ||
        std::sscanf(header.c_str(), "%31s %d world=%d launch=%n", magic, &version, &world, &used) != 3 ||
        std::strcmp(magic, kMagic) != 0)
      throw DpError(fmt::format("{}: '{}' is not a dptrain bootstrap file; use a directory of its own for the "
                                "rendezvous",
                                who_, p));
    if (version != kVersion)
      throw DpError(fmt::format("{}: '{}' has format version {}, this dptrain reads version {}: run the same dptrain "
                                "build on every rank",
                                who_, p, version, kVersion));
    const std::string launch = header.substr(static_cast<size_t>(used));
    if (launch != launch_id_) {
      other_launch = fmt::format("'{}' is from another launch ('{}', this one is '{}')", p, launch, launch_id_);
      return false;
    }
    if (world != info_.size)
      throw DpError(fmt::format("{}: inconsistent world size: rank {} was started with a world of {} processes (its "
                                "file '{}'), this rank ({}) with {}; start every process with the same world size",
                                who_, rank, world, p, info_.rank, info_.size));
    blob = data.substr(nl + 1);
    return true;
  }

  const std::string who_ = "bootstrap file";
  std::string dir_;
  double timeout_s_, report_s_;
  std::string launch_id_;
  uint64_t seq_ = 0;
};

std::string launch_id(const EnvLookup& env) {
  std::string id;
  // DPTRAIN_RUN_ID is a tunable (runtime/tunables.h), read here through the injectable lookup
  // with the launchers' ids it stands in for.
  if (const char* v = env("DPTRAIN_RUN_ID")) id = v;
  else if (const char* job = env("SLURM_JOB_ID")) {
    const char* step = env("SLURM_STEP_ID");
    id = fmt::format("{}.{}", job, step ? step : "");
  } else if (const char* t = env("TORCHELASTIC_RUN_ID")) {
    id = t;
  }
  for (char& c : id)
    if (c == '\n' || c == ' ') c = '_';
  return id;
}

}  // namespace

std::unique_ptr<Bootstrap> make_file_bootstrap(const std::string& dir, double timeout_s, const EnvLookup& env) {
  const std::string who = "bootstrap file";
  if (dir.empty() || dir[0] != '/')
    DP_THROW_USER("{}: the rendezvous directory must be an absolute path (file:///shared/dir), not '{}'", who, dir);
  // Rank and size: torchrun's variables, else srun's.
  const bool torch = env("RANK") || env("WORLD_SIZE");
  const char* rank_var = torch ? "RANK" : "SLURM_PROCID";
  const char* size_var = torch ? "WORLD_SIZE" : "SLURM_NTASKS";
  std::vector<std::string> missing;
  for (const char* v : {rank_var, size_var})
    if (env(v) == nullptr) missing.push_back(v);
  if (missing.size() == 2)
    DP_THROW_USER("{}: no rank information: set RANK and WORLD_SIZE, or run under srun (SLURM_PROCID, SLURM_NTASKS)",
                  who);
  if (!missing.empty()) DP_THROW_USER("{}: {} is set but {} is not", who, missing[0] == rank_var ? size_var : rank_var,
                                      missing[0]);
  constexpr int kMax = 1 << 24;
  LaunchInfo info;
  info.size = env_int(env, who, size_var, -1, 1, kMax);
  info.rank = env_int(env, who, rank_var, -1, 0, kMax);
  if (info.rank >= info.size)
    DP_THROW_USER("{}: {}={} is not below {}={}", who, rank_var, info.rank, size_var, info.size);
  info.local_rank = env_int(env, who, torch ? "LOCAL_RANK" : "SLURM_LOCALID", -1, 0, info.size - 1);
  info.node_id = env_int(env, who, torch ? "GROUP_RANK" : "SLURM_NODEID", -1, 0, info.size - 1);
  if (torch) info.local_size = env_int(env, who, "LOCAL_WORLD_SIZE", -1, 1, info.size);
  return std::make_unique<FileBootstrap>(dir, info, timeout_s, launch_id(env), host_key(env),
                                         job_token_from_env(env("DPTRAIN_JOB_TOKEN")), rendezvous_report_s(env));
}

}  // namespace dp
