// defines: the multi-process harness of the ring tests: run_ranks forks N children, gives each a
// bootstrap, runs a body, and collects exit codes, messages and timings; ForkBootstrap is a
// test-only bootstrap over a shared anonymous mapping made before the fork (no files, no
// ports); deterministic inputs (input_value) shared by the children and their oracles.
#pragma once
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "collectives/bootstrap/bootstrap.h"
#include "base/half.h"
#include "base/dtype.h"
#include "base/error.h"

namespace dp::ringtest {

inline double monotonic_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Shared between the parent and its children: one allgather arena, one text slot per rank for
// what the child wants to report, and a few timestamps.
constexpr int kMaxRanks = 16;
constexpr size_t kBlobBytes = 512;
constexpr size_t kReportBytes = 8192;
struct SharedState {
  std::atomic<uint64_t> round[kMaxRanks];           // last allgather round each rank has published
  char blob[2][kMaxRanks][kBlobBytes];              // round % 2 -> rank -> blob
  uint32_t blob_len[2][kMaxRanks];
  char report[kMaxRanks][kReportBytes];             // what the child says (error text, notes)
  std::atomic<double> t_mark[kMaxRanks];            // per-rank timestamp (monotonic_s): test-defined
  std::atomic<double> t_event;                      // a global timestamp: test-defined (e.g. the kill)
  std::atomic<uint64_t> counter;                    // test-defined
  std::atomic<int> pid[kMaxRanks];                  // each child's process id
};

// allgather through the shared mapping: round k writes slot k % 2, then waits until every rank
// has published round k. A rank can be at most one round ahead of the slowest (it needs everyone's
// round k to leave round k), so two slots never collide.
// Pretends that consecutive blocks of ranks_per_node ranks share a node (0 = all on one node),
// which is what decides shared memory against TCP in the ring backend.
class ForkBootstrap final : public Bootstrap {
 public:
  ForkBootstrap(SharedState* s, int rank, int size, double timeout_s, int ranks_per_node = 0)
      : s_(s), rank_(rank), size_(size), timeout_s_(timeout_s), per_node_(ranks_per_node > 0 ? ranks_per_node : size) {
    DP_CHECK(size % per_node_ == 0, "test bootstrap: {} ranks do not fill nodes of {}", size, per_node_);
  }
  const char* kind() const override { return "fork-test"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return rank_ % per_node_; }
  int local_size() const override { return per_node_; }
  int node_id() const override { return rank_ / per_node_; }
  // Every ring test proves a job token at setup (collectives/ring/mesh.h).
  const std::string& job_token() const override { return token_; }
  std::vector<std::string> allgather(const std::string& mine) override {
    DP_CHECK(mine.size() <= kBlobBytes, "test bootstrap: blob of {} bytes", mine.size());
    const uint64_t k = ++round_;
    const int slot = static_cast<int>(k % 2);
    std::memcpy(s_->blob[slot][rank_], mine.data(), mine.size());
    s_->blob_len[slot][rank_] = static_cast<uint32_t>(mine.size());
    s_->round[rank_].store(k, std::memory_order_release);
    const double deadline = monotonic_s() + timeout_s_;
    std::vector<std::string> all(size_);
    for (int r = 0; r < size_; ++r) {
      while (s_->round[r].load(std::memory_order_acquire) < k) {
        DP_CHECK(monotonic_s() < deadline, "test bootstrap: rank {} did not arrive in allgather {}", r, k);
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      all[r].assign(s_->blob[slot][r], s_->blob_len[slot][r]);
    }
    return all;
  }

 private:
  SharedState* s_;
  int rank_, size_;
  double timeout_s_;
  int per_node_;
  uint64_t round_ = 0;
  std::string token_ = "ring-harness-job-token-0123456789";
};

struct RankResult {
  int exit_code = -1;     // when it exited
  int signal = 0;         // when a signal ended it
  bool hung = false;      // still running at the limit (then killed)
  double exit_time = 0;   // monotonic_s() when the parent saw it end
  std::string report;     // the child's report slot
  double mark = 0;        // the child's t_mark slot
  double event = 0;       // the shared t_event
};

// Child side: append to this rank's report (visible to the parent after the child ends).
inline void report(SharedState* s, int rank, const std::string& text) {
  size_t used = strnlen(s->report[rank], kReportBytes);
  size_t n = std::min(text.size(), kReportBytes - 1 - used);
  std::memcpy(s->report[rank] + used, text.data(), n);
}

// Forks n children; child r runs body(bootstrap, shared state, r) and exits with its return
// value (1 and the message in its report on an exception). Waits at most limit_s, then kills
// what is left with SIGKILL (hung = true). ranks_per_node: see ForkBootstrap.
using RankBody = std::function<int(Bootstrap&, SharedState*, int)>;
inline std::vector<RankResult> run_ranks(int n, const RankBody& body, double limit_s, int ranks_per_node = 0,
                                         double bootstrap_timeout_s = 30) {
  DP_CHECK(n <= kMaxRanks, "at most {} ranks", kMaxRanks);
  void* mem = mmap(nullptr, sizeof(SharedState), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  DP_CHECK(mem != MAP_FAILED, "mmap of the shared test state failed");
  auto* s = new (mem) SharedState();
  std::fflush(nullptr);
  std::vector<pid_t> pids(n);
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    DP_CHECK(pid >= 0, "fork failed");
    if (pid == 0) {
      int code = 1;
      s->pid[r].store(getpid());
      try {
        set_process_identity(r, n);
        ForkBootstrap bs(s, r, n, bootstrap_timeout_s, ranks_per_node);
        code = body(bs, s, r);
      } catch (const std::exception& e) {
        report(s, r, std::string("exception: ") + e.what());
        code = 1;
      }
      std::fflush(nullptr);
      _exit(code);
    }
    pids[r] = pid;
  }
  std::vector<RankResult> out(n);
  int left = n;
  const double deadline = monotonic_s() + limit_s;
  while (left > 0) {
    for (int r = 0; r < n; ++r) {
      if (pids[r] <= 0) continue;
      int status = 0;
      pid_t got = waitpid(pids[r], &status, WNOHANG);
      if (got == pids[r]) {
        out[r].exit_time = monotonic_s();
        if (WIFEXITED(status)) out[r].exit_code = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) out[r].signal = WTERMSIG(status);
        pids[r] = 0;
        --left;
      }
    }
    if (left > 0 && monotonic_s() > deadline) {
      for (int r = 0; r < n; ++r)
        if (pids[r] > 0) {
          kill(pids[r], SIGKILL);
          waitpid(pids[r], nullptr, 0);
          out[r].hung = true;
          out[r].exit_time = monotonic_s();
          pids[r] = 0;
        }
      break;
    }
    if (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (int r = 0; r < n; ++r) {
    out[r].report.assign(s->report[r], strnlen(s->report[r], kReportBytes));
    out[r].mark = s->t_mark[r].load();
    out[r].event = s->t_event.load();
  }
  munmap(mem, sizeof(SharedState));
  return out;
}

// "rank 0: exit 0\nrank 1: exit 1: <report>..." for assertion messages.
inline std::string summary(const std::vector<RankResult>& rs) {
  std::ostringstream o;
  for (size_t r = 0; r < rs.size(); ++r) {
    o << "rank " << r << ": ";
    if (rs[r].hung) o << "HUNG (killed at the limit)";
    else if (rs[r].signal) o << "signal " << rs[r].signal;
    else o << "exit " << rs[r].exit_code;
    if (!rs[r].report.empty()) o << ": " << rs[r].report;
    o << "\n";
  }
  return o.str();
}

// One failure (with every rank's story) when any rank did not exit with `code`.
inline std::string all_exited_with(const std::vector<RankResult>& rs, int code) {
  for (const auto& r : rs)
    if (r.hung || r.signal || r.exit_code != code) return summary(rs);
  return "";
}

// ---- deterministic inputs ----

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Element i of rank r's input in test case `seed`, in [-1, 1) for floats (full mantissa, then
// rounded to the dtype) and in [-1000, 1000] for i32. Written as raw bytes of the dtype.
inline void input_value(DType dt, uint64_t seed, int r, int64_t i, void* out) {
  uint64_t h = splitmix64(seed * 0x100000001B3ull ^ splitmix64(static_cast<uint64_t>(r) << 40 ^ static_cast<uint64_t>(i)));
  double u = static_cast<double>(h >> 11) * 0x1.0p-53 * 2.0 - 1.0;
  switch (dt) {
    case DType::F32: { float v = static_cast<float>(u); std::memcpy(out, &v, 4); break; }
    case DType::F64: std::memcpy(out, &u, 8); break;
    case DType::F16: { uint16_t v = kernels::cpu::f32_to_f16(static_cast<float>(u)); std::memcpy(out, &v, 2); break; }
    case DType::BF16: { uint16_t v = kernels::cpu::f32_to_bf16(static_cast<float>(u)); std::memcpy(out, &v, 2); break; }
    case DType::I32: { int32_t v = static_cast<int32_t>(h % 2001) - 1000; std::memcpy(out, &v, 4); break; }
    default: DP_CHECK(false, "no test inputs for {}", dtype_name(dt));
  }
}

// The value as a double (for tolerance checks).
inline double as_double(DType dt, const void* p) {
  switch (dt) {
    case DType::F32: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::F64: { double v; std::memcpy(&v, p, 8); return v; }
    case DType::F16: { uint16_t v; std::memcpy(&v, p, 2); return kernels::cpu::f16_to_f32(v); }
    case DType::BF16: { uint16_t v; std::memcpy(&v, p, 2); return kernels::cpu::bf16_to_f32(v); }
    case DType::I32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    default: return 0;
  }
}

}  // namespace dp::ringtest
