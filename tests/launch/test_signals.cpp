// Stop signals through the real binary (`dptrain --nproc 2`, launch/stop_signals.h):
//   - SIGUSR1 delivered to the rank-1 worker only (not to the launcher, not to rank 0): both
//     ranks stop after the same step N (the all-reduced stop request), rank 0 writes
//     checkpoints/step-N and `latest` names it, rank 1's log says it received the signal and
//     rank 0's that another rank did, the launcher exits 0 (SIGUSR1 means "checkpoint and
//     requeue"); running the same command again resumes from step N to the end, and the final
//     weights equal an uninterrupted run's bit for bit (tools/diffckpt exits 0);
//   - SIGTERM to the launcher (forwarded to both workers): both ranks stop after the same step,
//     its checkpoint is written and `latest` names it, and the launcher exits 128 + SIGTERM.
//   - while the workers train, every thread of each blocks the four signals and none has a handler
//     for them: only the signal thread takes them (launch/signal_thread.h), never a thread that
//     runs oneDNN (whose AVX2 sgemm points rsp into the heap: a handler's frame there corrupted it).
// The runs are an MLP [256, 256] on 4096 Fashion-MNIST samples, 2 ranks x 32, 400 steps (about
// 1-3 s on 2 shared cores), so they are still running when the signal comes after step 20. A
// log line every step: the rank logs reach the disk when spdlog's buffer fills (or at a warning),
// so with one line every 10 steps they would show step 20 only at about step 260.
#include <fcntl.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/safetensors.h"
#include "tests/fashion_mnist.h"
#include "tests/launch/run_files.h"

extern char** environ;

namespace {

using dp::testutil::read_file;

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

const std::string kBin = std::string(DPTRAIN_BINARY_DIR) + "/dptrain";
const std::string kDiff = std::string(DPTRAIN_BINARY_DIR) + "/diffckpt";
constexpr int kSteps = 400;
constexpr int kSignalAfter = 20;  // signal once both ranks logged this step

std::string root_for(const std::string& tag) {
  auto p = fs::temp_directory_path() / ("dptrain_signals_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

// `dptrain --nproc 2 fmnist_mlp.cfg ...` into root/m, started in the background; output in
// root/out-<n>.log. The environment is ours without anything of an enclosing Slurm job or
// launcher: rank 0 must not `scontrol requeue` the job the test itself runs in.
class Launch {
 public:
  explicit Launch(const std::string& root) : root_(root) {
    static int n = 0;
    log_ = fmt::format("{}/out-{}.log", root, n++);
    std::vector<std::string> args = {kBin,
                                     "--nproc",
                                     "2",
                                     std::string(DPTRAIN_SOURCE_DIR) + "/models/fmnist_mlp.cfg",
                                     "--run-dir",
                                     root,
                                     "--name",
                                     "m",
                                     "--log-level",
                                     "info",
                                     "--set",
                                     dp::test::fashion_mnist_override(),
                                     "model.hidden=[256,256]",
                                     "data.train_limit=4096",
                                     "data.eval_limit=256",
                                     "train.steps=" + std::to_string(kSteps),
                                     "train.batch_size=32",
                                     "train.optimizer=sgd",
                                     "train.lr=0.01",
                                     "train.momentum=0.9",
                                     "train.threads=1",
                                     "train.log_every=1",
                                     "checkpoint.keep=0"};
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      const std::string kv = *e;
      const std::string name = kv.substr(0, kv.find('='));
      if (name.rfind("SLURM_", 0) == 0 || name.rfind("PMI", 0) == 0 || name.rfind("OMPI_", 0) == 0 ||
          name.rfind("DPTRAIN_", 0) == 0 || name == "RANK" || name == "WORLD_SIZE" || name == "LOCAL_RANK" ||
          name == "LOCAL_WORLD_SIZE" || name == "GROUP_RANK" || name == "MASTER_ADDR" || name == "MASTER_PORT")
        continue;
      env.push_back(kv);
    }
    cmd_ = kBin;
    for (size_t i = 1; i < args.size(); ++i) cmd_ += " " + args[i];
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    const int rc = posix_spawn(&pid_, kBin.c_str(), &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) pid_ = -1;
  }
  ~Launch() {
    if (pid_ > 0) {  // a failed test: the workers die with the launcher (PDEATHSIG)
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;

  pid_t pid() const { return pid_; }
  std::string output() const { return cmd_ + "\n" + read_file(log_); }

  // The launcher's exit code (128 + signal if it was killed), or nullopt after `seconds`.
  std::optional<int> wait(double seconds) {
    const auto until = Clock::now() + std::chrono::duration<double>(seconds);
    while (pid_ > 0) {
      int st = 0;
      const pid_t r = ::waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      if (r < 0 || Clock::now() >= until) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return std::nullopt;
  }

 private:
  std::string root_, log_, cmd_;
  pid_t pid_ = -1;
};

std::string rank_log(const std::string& root, int r) { return fmt::format("{}/m/logs/rank-{}.log", root, r); }

std::string ckpt(const std::string& root, int step) {
  return fmt::format("{}/m/checkpoints/step-{:08}.safetensors", root, step);
}

// True once both ranks' logs show progress past `step` (a "step S/total" line with S >= step),
// i.e. both are inside the training loop with their stop handlers installed.
bool both_past(const std::string& root, int step) {
  static const std::regex line(R"( step (\d+)/\d+ loss )");
  for (int r : {0, 1}) {
    const std::string log = read_file(rank_log(root, r));
    int best = -1;
    for (std::sregex_iterator it(log.begin(), log.end(), line), end; it != end; ++it)
      best = std::max(best, std::stoi((*it)[1].str()));
    if (best < step) return false;
  }
  return true;
}

// The pid of the launcher's child whose environment holds exactly RANK=<rank>, or -1.
pid_t worker_of_rank(pid_t launcher, int rank) {
  const std::string want = "RANK=" + std::to_string(rank);
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    // /proc/<pid>/stat: "pid (comm) state ppid ...", comm may hold spaces: parse after the last ')'.
    const std::string stat = read_file(e.path() / "stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    std::string state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid != launcher) continue;
    const std::string env = read_file(e.path() / "environ");
    std::stringstream vars(env);
    std::string kv;
    while (std::getline(vars, kv, '\0'))
      if (kv == want) return static_cast<pid_t>(std::stoi(name));
  }
  return -1;
}

// The step N of the rank's "stopping after step N: <why>; writing a checkpoint" line, and the why.
struct StopLine {
  int step = -1;
  std::string why;
};
StopLine stop_line(const std::string& root, int r) {
  static const std::regex line(R"(stopping after step (\d+): ([^;\n]*); writing a checkpoint)");
  const std::string log = read_file(rank_log(root, r));
  std::smatch m;
  if (!std::regex_search(log, m, line)) return {};
  return {std::stoi(m[1].str()), m[2].str()};
}

bool wait_until(double seconds, const std::function<bool()>& ok) {
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < until) {
    if (ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return ok();
}

// diffckpt a b: its exit code and output.
std::pair<int, std::string> diffckpt(const std::string& a, const std::string& b, const std::string& out) {
  const std::string cmd = kDiff + " " + a + " " + b + " > " + out + " 2>&1";
  const int st = std::system(cmd.c_str());
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, cmd + "\n" + read_file(out)};
}

TEST(Signals, UsrOneToOneRankStopsBothAtTheSameStepAndTheResumedRunEqualsAStraightOne) {
  SKIP_WITHOUT_FASHION_MNIST();
  const std::string a = root_for("straight"), b = root_for("usr1");

  Launch straight(a);
  ASSERT_GT(straight.pid(), 0) << "cannot start " << kBin;
  const auto straight_rc = straight.wait(60);
  ASSERT_EQ(straight_rc, std::optional<int>(0)) << straight.output();

  std::optional<int> rc;
  int stop = -1;
  {
    Launch run(b);
    ASSERT_GT(run.pid(), 0) << "cannot start " << kBin;
    ASSERT_TRUE(wait_until(30, [&] { return both_past(b, kSignalAfter); }))
        << "the ranks did not both log step " << kSignalAfter << " within 30 s\n"
        << run.output();
    const pid_t rank1 = worker_of_rank(run.pid(), 1), rank0 = worker_of_rank(run.pid(), 0);
    ASSERT_GT(rank1, 0) << "no child of the launcher (pid " << run.pid() << ") has RANK=1 in its environment";
    ASSERT_GT(rank0, 0) << "no child of the launcher has RANK=0";
    ASSERT_NE(rank0, rank1);
    ASSERT_EQ(::kill(rank1, SIGUSR1), 0);
    rc = run.wait(30);
    ASSERT_TRUE(rc.has_value()) << "dptrain still running 30 s after SIGUSR1 to rank 1\n" << run.output();
    EXPECT_EQ(*rc, 0) << "SIGUSR1 (checkpoint and requeue) exits 0\n" << run.output();

    const StopLine s0 = stop_line(b, 0), s1 = stop_line(b, 1);
    ASSERT_GT(s1.step, 0) << "rank 1 logged no 'stopping after step N' line\n" << read_file(rank_log(b, 1));
    ASSERT_EQ(s0.step, s1.step) << "the ranks stopped after different steps\n"
                                << read_file(rank_log(b, 0)) << read_file(rank_log(b, 1));
    stop = s1.step;
    std::printf("both ranks stopped after step %d of %d (SIGUSR1 to rank 1 after step %d)\n", stop, kSteps,
                kSignalAfter);
    ASSERT_LT(stop, kSteps) << "the run ended before the signal took effect: make it longer\n" << run.output();
    EXPECT_GE(stop, kSignalAfter);
    EXPECT_EQ(s1.why, "User defined signal 1 received");
    EXPECT_EQ(s0.why, "another rank received User defined signal 1");
    EXPECT_THAT(read_file(rank_log(b, 0)), HasSubstr("not a Slurm job (SLURM_JOB_ID is not set): nothing to requeue"));
  }
  EXPECT_EQ(read_file(b + "/m/checkpoints/latest"), fmt::format("step-{:08}.safetensors\n", stop));
  ASSERT_TRUE(fs::exists(ckpt(b, stop)));
  EXPECT_EQ(dp::read_checkpoint_meta(dp::SafetensorsFile::open(ckpt(b, stop))).step, stop);
  EXPECT_FALSE(fs::exists(b + "/m/final.safetensors")) << "a stopped run writes no final weights";

  Launch resumed(b);
  ASSERT_GT(resumed.pid(), 0);
  const auto resumed_rc = resumed.wait(60);
  ASSERT_EQ(resumed_rc, std::optional<int>(0)) << resumed.output();
  for (int r : {0, 1})
    EXPECT_THAT(read_file(rank_log(b, r)), HasSubstr(fmt::format("resumed from {}: step {}", ckpt(b, stop), stop)))
        << "rank " << r;

  const auto [code, out] = diffckpt(a + "/m/final.safetensors", b + "/m/final.safetensors", b + "/diff.txt");
  EXPECT_EQ(code, 0) << "final weights of the straight and the stopped+resumed run differ\n" << out;
  const auto [code2, out2] = diffckpt(ckpt(a, kSteps), ckpt(b, kSteps), b + "/diff2.txt");
  EXPECT_EQ(code2, 0) << "final checkpoints (weights and optimizer state) differ\n" << out2;
  if (!HasFailure()) {
    fs::remove_all(a);
    fs::remove_all(b);
  }
}

struct ThreadMasks {
  std::string name;  // the thread's comm
  uint64_t blocked = 0, caught = 0;
};

// Every thread of `pid`: its name and its SigBlk and SigCgt masks (/proc/<pid>/task/<tid>/status).
std::vector<ThreadMasks> thread_masks(pid_t pid) {
  std::vector<ThreadMasks> out;
  for (const auto& t : fs::directory_iterator(fmt::format("/proc/{}/task", pid))) {
    ThreadMasks m;
    std::istringstream status(read_file(t.path() / "status"));
    for (std::string line; std::getline(status, line);) {
      const std::string value = line.substr(line.find(':') + 1);
      if (line.rfind("Name:", 0) == 0) m.name = value.substr(value.find_first_not_of(" \t"));
      if (line.rfind("SigBlk:", 0) == 0) m.blocked = std::stoull(value, nullptr, 16);
      if (line.rfind("SigCgt:", 0) == 0) m.caught = std::stoull(value, nullptr, 16);
    }
    out.push_back(m);
  }
  return out;
}

TEST(Signals, NoWorkerThreadRunsAHandlerEveryOneBlocksTheStopAndFlightSignals) {
  SKIP_WITHOUT_FASHION_MNIST();
  const std::string b = root_for("masks");
  Launch run(b);
  ASSERT_GT(run.pid(), 0) << "cannot start " << kBin;
  ASSERT_TRUE(wait_until(30, [&] { return both_past(b, kSignalAfter); })) << run.output();
  uint64_t four = 0;
  for (int sig : {SIGUSR1, SIGTERM, SIGINT, SIGUSR2}) four |= uint64_t{1} << (sig - 1);
  for (int r : {0, 1}) {
    const pid_t w = worker_of_rank(run.pid(), r);
    ASSERT_GT(w, 0) << "rank " << r;
    const std::vector<ThreadMasks> threads = thread_masks(w);
    EXPECT_GE(threads.size(), 4u) << "rank " << r << ": the main, loader, signal and communication threads at least";
    int signal_threads = 0;
    for (const ThreadMasks& t : threads) {
      EXPECT_EQ(t.caught & four, 0u) << "rank " << r << " thread " << t.name;
      // The signal thread waits in sigwaitinfo, which shows the signals it waits for unblocked.
      if (t.name == "dp-signals") ++signal_threads;
      else EXPECT_EQ(t.blocked & four, four) << "rank " << r << " thread " << t.name;
    }
    EXPECT_EQ(signal_threads, 1) << "rank " << r;
  }
  ASSERT_EQ(::kill(run.pid(), SIGTERM), 0);
  EXPECT_EQ(run.wait(30), std::optional<int>(128 + SIGTERM)) << run.output();
  if (!HasFailure()) fs::remove_all(b);
}

TEST(Signals, TermToTheLauncherStopsBothAtTheSameStepWithACheckpointAndExits143) {
  SKIP_WITHOUT_FASHION_MNIST();
  const std::string b = root_for("term");
  Launch run(b);
  ASSERT_GT(run.pid(), 0) << "cannot start " << kBin;
  ASSERT_TRUE(wait_until(30, [&] { return both_past(b, kSignalAfter); }))
      << "the ranks did not both log step " << kSignalAfter << " within 30 s\n"
      << run.output();
  ASSERT_EQ(::kill(run.pid(), SIGTERM), 0);
  const auto rc = run.wait(30);
  ASSERT_TRUE(rc.has_value()) << "dptrain still running 30 s after SIGTERM\n" << run.output();
  EXPECT_EQ(*rc, 128 + SIGTERM) << run.output();

  const StopLine s0 = stop_line(b, 0), s1 = stop_line(b, 1);
  ASSERT_GT(s0.step, 0) << "rank 0 logged no 'stopping after step N' line\n" << read_file(rank_log(b, 0));
  ASSERT_EQ(s0.step, s1.step) << "the ranks stopped after different steps\n"
                              << read_file(rank_log(b, 0)) << read_file(rank_log(b, 1));
  const int stop = s0.step;
  std::printf("both ranks stopped after step %d of %d (SIGTERM to the launcher after step %d)\n", stop, kSteps,
              kSignalAfter);
  ASSERT_LT(stop, kSteps) << "the run ended before the signal took effect: make it longer\n" << run.output();
  // Both got SIGTERM from the launcher; which one saw it first at the agreement is a race.
  for (const StopLine& s : {s0, s1})
    EXPECT_TRUE(s.why == "Terminated received" || s.why == "another rank received Terminated") << s.why;
  EXPECT_EQ(read_file(b + "/m/checkpoints/latest"), fmt::format("step-{:08}.safetensors\n", stop));
  ASSERT_TRUE(fs::exists(ckpt(b, stop)));
  EXPECT_EQ(dp::read_checkpoint_meta(dp::SafetensorsFile::open(ckpt(b, stop))).step, stop);
  EXPECT_FALSE(fs::exists(b + "/m/final.safetensors"));
  for (int r : {0, 1})
    EXPECT_THAT(read_file(rank_log(b, r)), HasSubstr(fmt::format("stopped at step {} (Terminated)", stop)))
        << "rank " << r;
  if (!HasFailure()) fs::remove_all(b);
}

}  // namespace
