// The local launcher (dptrain --nproc N): workers get the env bootstrap's variables, every line
// of their output comes prefixed with the rank, signals are forwarded, a failing worker stops
// the others and its status becomes the launcher's. Most cases run /bin/sh scripts as workers
// (fast, and each can misbehave in exactly one way); one runs dptrain itself on a tiny cfg.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "launch/local_launcher.h"
#include "multiproc.h"

namespace dp::launch {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::string> sorted_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::sort(lines.begin(), lines.end());
  return lines;
}

struct Launch {
  int code = -1;  // the launcher's exit status
  std::string out, err;
  double seconds = 0;
};

// Waits (at most 40 s, then SIGKILL and a failure naming `who`) for `pid`, started at t0 with
// its output in the files out and err.
Launch wait_for(pid_t pid, Clock::time_point t0, const std::string& out, const std::string& err, const char* who) {
  Launch l;
  int st = 0;
  while (::waitpid(pid, &st, WNOHANG) == 0) {
    if (Clock::now() - t0 > std::chrono::seconds(40)) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &st, 0);
      ADD_FAILURE() << who << " did not finish within 40 s";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  l.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  l.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  l.out = slurp(out);
  l.err = slurp(err);
  return l;
}

class LocalLauncher : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("dptrain_launcher_{}_{}", ::getpid(),
                                                    testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `sh -c script` under run_local in a forked child (the launcher takes over signals and
  // fds 1/2) with its stdout/stderr in files; `during` runs in the test meanwhile.
  Launch launch_sh(int nproc, const std::string& script, double grace_s = 10,
                   const std::function<void(pid_t)>& during = nullptr) {
    return launch_sh(nproc, script, LocalLaunchOptions{"/bin/sh", grace_s}, during);
  }
  Launch launch_sh(int nproc, const std::string& script, const LocalLaunchOptions& options,
                   const std::function<void(pid_t)>& during = nullptr) {
    const std::string out = (dir_ / "out").string(), err = (dir_ / "err").string();
    std::fflush(stdout);
    std::fflush(stderr);
    const auto t0 = Clock::now();
    pid_t pid = ::fork();
    if (pid == 0) {
      int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(o, 1);
      ::dup2(e, 2);
      int code = 100;
      try {
        code = run_local(nproc, {"-c", script}, options);
      } catch (const std::exception& ex) {
        std::fprintf(stderr, "exception: %s\n", ex.what());
      }
      std::fflush(stdout);
      ::_exit(code);
    }
    if (during) during(pid);
    return wait_for(pid, t0, out, err, "the launcher");
  }

  // Waits until the launcher's stdout holds `n` lines containing `what` (at most 10 s).
  bool wait_for_lines(const std::string& what, int n) {
    const auto t0 = Clock::now();
    while (Clock::now() - t0 < std::chrono::seconds(10)) {
      const std::string text = slurp((dir_ / "out").string());
      int count = 0;
      for (size_t p = 0; (p = text.find(what, p)) != std::string::npos; ++p) ++count;
      if (count >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  fs::path dir_;
};

TEST(WorkerArgs, DropNprocAndItsValueKeepEverythingElseInOrder) {
  const char* argv[] = {"dptrain", "--nproc", "4", "model.cfg", "--set", "train.steps=3", "--nproc=2", "--name", "x"};
  EXPECT_EQ(worker_args_of(9, argv),
            (std::vector<std::string>{"model.cfg", "--set", "train.steps=3", "--name", "x"}));
  const char* restarts[] = {"dptrain", "--max-restarts", "3", "m.cfg", "--max-restarts=1", "--reset"};
  EXPECT_EQ(worker_args_of(6, restarts), (std::vector<std::string>{"m.cfg", "--reset"}));
  const char* none[] = {"dptrain"};
  EXPECT_TRUE(worker_args_of(1, none).empty());
}

TEST_F(LocalLauncher, WorkersGetTheEnvBootstrapVariablesAndEveryLineIsPrefixed) {
  auto l = launch_sh(3,
                     "echo \"env $RANK of $WORLD_SIZE local $LOCAL_RANK/$LOCAL_WORLD_SIZE group $GROUP_RANK at "
                     "$MASTER_ADDR\"; echo \"err $RANK\" >&2; echo \"port $MASTER_PORT\" >&2; printf 'no newline %s' "
                     "$RANK");
  EXPECT_EQ(l.code, 0) << l.err;
  EXPECT_EQ(sorted_lines(l.out),
            (std::vector<std::string>{"[rank 0] env 0 of 3 local 0/3 group 0 at 127.0.0.1", "[rank 0] no newline 0",
                                      "[rank 1] env 1 of 3 local 1/3 group 0 at 127.0.0.1", "[rank 1] no newline 1",
                                      "[rank 2] env 2 of 3 local 2/3 group 0 at 127.0.0.1", "[rank 2] no newline 2"}));
  // stderr: each rank's line, and one port shared by all (a valid one).
  std::vector<std::string> errs, ports;
  for (const auto& line : sorted_lines(l.err)) (line.find("] port ") != std::string::npos ? ports : errs).push_back(line);
  EXPECT_EQ(errs, (std::vector<std::string>{"[rank 0] err 0", "[rank 1] err 1", "[rank 2] err 2"}));
  ASSERT_EQ(ports.size(), 3u) << l.err;
  const std::string port = ports[0].substr(ports[0].find("port ") + 5);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(ports[r], fmt::format("[rank {}] port {}", r, port));
  EXPECT_GT(std::stoi(port), 0);
  EXPECT_LT(std::stoi(port), 65536);
}

TEST_F(LocalLauncher, LongOutputKeepsWholeLines) {
  // 2000 lines per worker, written in one go: none is split or mixed with another rank's.
  auto l = launch_sh(2, "i=0; while [ $i -lt 2000 ]; do echo \"line $i of rank $RANK xxxxxxxxxxxxxxxxxxxxxxxxxxxx\"; "
                        "i=$((i+1)); done");
  EXPECT_EQ(l.code, 0);
  const auto lines = sorted_lines(l.out);
  ASSERT_EQ(lines.size(), 4000u);
  for (const auto& line : lines) {
    const bool r0 = line.rfind("[rank 0] line ", 0) == 0 && line.find(" of rank 0 xxx") != std::string::npos;
    const bool r1 = line.rfind("[rank 1] line ", 0) == 0 && line.find(" of rank 1 xxx") != std::string::npos;
    ASSERT_TRUE(r0 || r1) << line;
  }
}

TEST_F(LocalLauncher, FailingWorkerStopsTheOthersAndGivesItsStatus) {
  auto l = launch_sh(3,
                     "if [ \"$RANK\" = 1 ]; then sleep 0.3; exit 7; fi; trap 'echo \"TERM at rank $RANK\"; exit 0' "
                     "TERM; while true; do sleep 0.05; done");
  EXPECT_EQ(l.code, 7);
  EXPECT_LT(l.seconds, 4.0);
  // The launcher's own line first; the shells may add "[rank r] Terminated" for their sleep.
  EXPECT_EQ(l.err.substr(0, l.err.find('\n') + 1), "dptrain: rank 1 exited with status 7; stopping the other 2 workers\n");
  for (const auto& line : sorted_lines(l.err.substr(l.err.find('\n') + 1)))
    EXPECT_TRUE(line == "[rank 0] Terminated" || line == "[rank 2] Terminated") << line;
  EXPECT_EQ(sorted_lines(l.out), (std::vector<std::string>{"[rank 0] TERM at rank 0", "[rank 2] TERM at rank 2"}));
}

TEST_F(LocalLauncher, WorkerIgnoringSigtermIsKilledAfterTheGracePeriod) {
  auto l = launch_sh(2, "if [ \"$RANK\" = 1 ]; then sleep 0.2; exit 5; fi; trap '' TERM; sleep 30", /*grace_s=*/0.5);
  EXPECT_EQ(l.code, 5);
  EXPECT_LT(l.seconds, 4.0);
  EXPECT_EQ(l.err, "dptrain: rank 1 exited with status 5; stopping the other 1 worker\n"
                   "dptrain: rank 0 did not stop within 0.5 s of SIGTERM: killing it\n");
}

TEST_F(LocalLauncher, WorkerKilledBySignalGives128PlusSignal) {
  auto l = launch_sh(2, "if [ \"$RANK\" = 0 ]; then kill -9 $$; fi; sleep 30");
  EXPECT_EQ(l.code, 137);
  EXPECT_LT(l.seconds, 4.0);
  EXPECT_EQ(l.err, "dptrain: rank 0 was killed by signal 9 (SIGKILL); stopping the other 1 worker\n");
}

// The launcher's own lines (not a worker's "[rank r] ..." nor a shell's), in order.
std::vector<std::string> launcher_lines(const std::string& err) {
  std::vector<std::string> out;
  std::istringstream in(err);
  for (std::string l; std::getline(in, l);)
    if (l.rfind("dptrain: ", 0) == 0) out.push_back(l);
  return out;
}

std::string host_name() {
  char h[256] = {};
  ::gethostname(h, sizeof h - 1);
  return h;
}

// A worker that fails in the first launch (rank 1, status 7) while rank 0 waits for SIGTERM;
// every launch says which it is, its port and arguments. Rank 1 fails only once rank 0 has said
// so (a marker file named by the launch's port, which rank 1 removes): under load, a rank 0 not
// yet started would be stopped before its line.
const char* kFailsOnce =
    "echo \"launch ${DPTRAIN_RESTART_COUNT:-0} rank $RANK port $MASTER_PORT args $*\"; "
    "m=${TMPDIR:-/tmp}/dptrain_launcher_test_$MASTER_PORT; "
    "if [ \"${DPTRAIN_RESTART_COUNT:-0}\" = 0 ]; then "
    "  if [ \"$RANK\" = 1 ]; then while [ ! -e $m ]; do sleep 0.01; done; rm -f $m; exit 7; fi; "
    "  trap 'exit 0' TERM; : > $m; while true; do sleep 0.05; done; fi";

TEST_F(LocalLauncher, FailedWorkerRestartsEveryWorkerOnceWithAFreshPort) {
  LocalLaunchOptions o{"/bin/sh", 10, 1};
  // The hook runs in the launcher (a forked child here): it reports through the output.
  o.on_restart = [](const RestartEvent& e) {
    return fmt::format("hook saw restart {}/{} of rank {} status {}", e.restart, e.max_restarts, e.failure.rank,
                       e.failure.status);
  };
  auto l = launch_sh(2, kFailsOnce, o);
  EXPECT_EQ(l.code, 0) << l.err;
  EXPECT_LT(l.seconds, 4.0);
  EXPECT_EQ(launcher_lines(l.err),
            (std::vector<std::string>{"dptrain: rank 1 exited with status 7; stopping the other 1 worker",
                                      "dptrain: restart 1 of 1: rank 1 on " + host_name() +
                                          " exited with status 7; hook saw restart 1/1 of rank 1 status 7; starting "
                                          "the 2 workers again"}));
  // Two launches of both ranks; the restarted workers get restart_args (sh takes "--set" as $0) and
  // a new port.
  const auto lines = sorted_lines(l.out);
  ASSERT_EQ(lines.size(), 4u) << l.out;
  std::string ports[2];
  for (const auto& line : lines) {
    const bool again = line.find("] launch 1 ") != std::string::npos;
    EXPECT_EQ(line.substr(line.find(" args")), again ? " args checkpoint.resume=true" : " args ") << line;
    const std::string port = line.substr(line.find("port ") + 5, line.find(" args") - line.find("port ") - 5);
    EXPECT_TRUE(ports[again].empty() || ports[again] == port) << l.out;
    ports[again] = port;
  }
  EXPECT_NE(ports[0], ports[1]) << l.out;
}

TEST_F(LocalLauncher, WorkerThatKeepsFailingStopsTheJobAfterKRestartsWithItsStatus) {
  auto l = launch_sh(2, "echo start; if [ \"$RANK\" = 1 ]; then sleep 0.1; exit 5; fi; trap 'exit 0' TERM; "
                        "while true; do sleep 0.05; done",
                     LocalLaunchOptions{"/bin/sh", 10, 2});
  EXPECT_EQ(l.code, 5);
  EXPECT_LT(l.seconds, 6.0);
  const std::string h = host_name();
  EXPECT_EQ(launcher_lines(l.err),
            (std::vector<std::string>{
                "dptrain: rank 1 exited with status 5; stopping the other 1 worker",
                "dptrain: restart 1 of 2: rank 1 on " + h + " exited with status 5; starting the 2 workers again",
                "dptrain: rank 1 exited with status 5; stopping the other 1 worker",
                "dptrain: restart 2 of 2: rank 1 on " + h + " exited with status 5; starting the 2 workers again",
                "dptrain: rank 1 exited with status 5; stopping the other 1 worker",
                "dptrain: rank 1 exited with status 5 after 2 restarts (--max-restarts 2): giving up; exiting with "
                "status 5"}));
  // 3 launches: rank 1 started 3 times (rank 0 may be stopped before its echo ran: count rank 1's).
  const auto lines = sorted_lines(l.out);
  EXPECT_EQ(std::count(lines.begin(), lines.end(), "[rank 1] start"), 3) << "3 launches\n" << l.out;
}

TEST_F(LocalLauncher, InputErrorStatusIsNotRetried) {
  auto l = launch_sh(2, "echo start; if [ \"$RANK\" = 1 ]; then exit 2; fi; trap 'exit 0' TERM; "
                        "while true; do sleep 0.05; done",
                     LocalLaunchOptions{"/bin/sh", 10, 3});
  EXPECT_EQ(l.code, 2);
  EXPECT_EQ(launcher_lines(l.err),
            (std::vector<std::string>{"dptrain: rank 1 exited with status 2; stopping the other 1 worker",
                                      "dptrain: not restarting: rank 1 exited with status 2, a cfg or input error "
                                      "that every attempt would repeat; exiting with status 2"}));
  // One launch: rank 1 started once. (Rank 0 may be stopped before its echo ran: count rank 1's.)
  const auto lines = sorted_lines(l.out);
  EXPECT_EQ(std::count(lines.begin(), lines.end(), "[rank 1] start"), 1) << "one launch\n" << l.out;
}

TEST_F(LocalLauncher, StopAskedOfTheLauncherIsNotRestarted) {
  auto l = launch_sh(2, "echo ready; sleep 30", LocalLaunchOptions{"/bin/sh", 10, 3}, [&](pid_t launcher) {
    ASSERT_TRUE(wait_for_lines("ready", 2));
    ::kill(launcher, SIGTERM);
  });
  EXPECT_EQ(l.code, 128 + SIGTERM);
  const auto lines = launcher_lines(l.err);
  ASSERT_EQ(lines.size(), 2u) << l.err;
  EXPECT_EQ(lines[1], "dptrain: not restarting: the launcher was asked to stop; exiting with status 143");
  EXPECT_EQ(sorted_lines(l.out).size(), 2u) << "one launch\n" << l.out;
}

TEST_F(LocalLauncher, Sigusr1IsForwardedToEveryWorker) {
  auto l = launch_sh(3, "trap 'echo \"USR1 at rank $RANK\"; exit 0' USR1; echo ready; while true; do sleep 0.05; done",
                     10, [&](pid_t launcher) {
                       ASSERT_TRUE(wait_for_lines("ready", 3));
                       ::kill(launcher, SIGUSR1);
                     });
  EXPECT_EQ(l.code, 0) << l.err;
  EXPECT_EQ(sorted_lines(l.out),
            (std::vector<std::string>{"[rank 0] USR1 at rank 0", "[rank 0] ready", "[rank 1] USR1 at rank 1",
                                      "[rank 1] ready", "[rank 2] USR1 at rank 2", "[rank 2] ready"}));
}

TEST_F(LocalLauncher, SigtermIsForwardedAndTheWorkersStatusReturned) {
  auto l = launch_sh(2, "echo ready; sleep 30", 10, [&](pid_t launcher) {
    ASSERT_TRUE(wait_for_lines("ready", 2));
    ::kill(launcher, SIGTERM);
  });
  EXPECT_EQ(l.code, 128 + SIGTERM);
  EXPECT_LT(l.seconds, 4.0);
  EXPECT_NE(l.err.find("was killed by signal 15 (SIGTERM)"), std::string::npos) << l.err;
}

// ---- dptrain itself ----

std::string dptrain_path() { return std::string(DPTRAIN_BINARY_DIR) + "/dptrain"; }

const char* kTinyCfg = R"(
[run]
name = "tiny"
log_level = "info"
[data]
dataset = "synthetic"
synthetic_shape = [1, 6, 6]
synthetic_train = 64
synthetic_eval = 16
synthetic_classes = 3
mean = [0.5]
std = [0.25]
[model]
preset = "mlp"
hidden = [8]
num_classes = 3
[train]
steps = 4
batch_size = 16
threads = 1
[checkpoint]
final = false
)";

// Runs dptrain with `args` (the launcher's own environment variables removed), output in files.
Launch run_dptrain(const fs::path& dir, const std::vector<std::string>& args) {
  const std::string out = (dir / "out").string(), err = (dir / "err").string();
  std::vector<std::string> all = {"dptrain"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string exe = dptrain_path();
  std::fflush(stdout);
  std::fflush(stderr);
  const auto t0 = Clock::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(o, 1);
    ::dup2(e, 2);
    for (const char* v : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK"}) ::unsetenv(v);
    ::execv(exe.c_str(), argv.data());
    ::_exit(127);
  }
  return wait_for(pid, t0, out, err, "dptrain");
}

TEST_F(LocalLauncher, DptrainNproc3EveryWorkerPrintsWithItsPrefix) {
  ASSERT_TRUE(fs::exists(dptrain_path())) << "build the dptrain target first (ninja dptrain)";
  auto single = run_dptrain(dir_, {"--list-layers"});
  ASSERT_EQ(single.code, 0) << single.err;
  ASSERT_GT(single.out.size(), 100u);
  auto l = run_dptrain(dir_, {"--nproc", "3", "--list-layers"});
  EXPECT_EQ(l.code, 0) << l.err;
  EXPECT_EQ(l.err, "");
  // Each worker's output, its prefix taken off, is the single process's output.
  std::string per_rank[3];
  std::istringstream in(l.out);
  for (std::string line; std::getline(in, line);) {
    ASSERT_TRUE(line.size() >= 9 && line.rfind("[rank ", 0) == 0 && line[7] == ']' && line[6] >= '0' && line[6] <= '2')
        << "line without a rank prefix: " << line;
    per_rank[line[6] - '0'] += line.substr(9) + "\n";
  }
  for (int r = 0; r < 3; ++r) EXPECT_EQ(per_rank[r], single.out) << "rank " << r;
}

// Disabled until the trainer writes its run directory from rank 0 only: today each worker
// trains on its own and all of them write <run>/checkpoints/step-*.safetensors.tmp, so one
// worker's rename fails (ENOENT) about every other run, and the launcher rightly exits 2.
TEST_F(LocalLauncher, DptrainNproc3TrainsWithEveryLinePrefixed) {
  ASSERT_TRUE(fs::exists(dptrain_path())) << "build the dptrain target first (ninja dptrain)";
  const std::string cfg = (dir_ / "tiny.cfg").string();
  std::ofstream(cfg) << kTinyCfg;
  auto l = run_dptrain(dir_, {"--nproc", "3", cfg, "--run-dir", (dir_ / "runs").string()});
  EXPECT_EQ(l.code, 0) << l.out << l.err;
  int done[3] = {0, 0, 0};
  for (const auto& line : sorted_lines(l.out + l.err)) {
    ASSERT_TRUE(line.rfind("[rank 0] ", 0) == 0 || line.rfind("[rank 1] ", 0) == 0 || line.rfind("[rank 2] ", 0) == 0)
        << "line without a rank prefix: " << line;
    if (line.find("done: 4 steps") != std::string::npos) ++done[line[6] - '0'];
  }
  // Rank 0 talks on the console; every rank writes its own log file.
  EXPECT_EQ(done[0], 1) << l.err;
  EXPECT_EQ(done[1], 0);
  EXPECT_EQ(done[2], 0);
  for (int r = 0; r < 3; ++r) {
    std::ifstream log(dir_ / "runs" / "tiny" / "logs" / ("rank-" + std::to_string(r) + ".log"));
    std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find(fmt::format("[rank {}/3 ", r)), std::string::npos) << "rank " << r << " log:\n" << text;
    EXPECT_NE(text.find("done: 4 steps"), std::string::npos) << "rank " << r << " log:\n" << text;
  }
}

TEST_F(LocalLauncher, DptrainWorkerKilledMidTrainingStopsTheRun) {
  // Every worker kills itself (SIGKILL) after step 2 (the trainer's fault hook): the launcher
  // names the first to go and exits with its status (137), at once. (Until the trainer writes
  // its run directory from rank 0 only, a worker may instead fail first on config.toml's
  // rename, status 2: the launcher must then report and return that one.)
  ASSERT_TRUE(fs::exists(dptrain_path())) << "build the dptrain target first (ninja dptrain)";
  const std::string cfg = (dir_ / "tiny.cfg").string();
  std::ofstream(cfg) << kTinyCfg;
  ::setenv("DPTRAIN_FAULT_KILL_AFTER_STEP", "2", 1);
  auto l = run_dptrain(dir_, {"--nproc", "3", cfg, "--run-dir", (dir_ / "runs").string(), "--log-level", "warn"});
  ::unsetenv("DPTRAIN_FAULT_KILL_AFTER_STEP");
  EXPECT_LT(l.seconds, 20.0);
  std::string reported;  // the launcher's own line (not prefixed)
  std::istringstream in(l.err);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("dptrain: rank ", 0) == 0) reported += line + "\n";
  ASSERT_EQ(std::count(reported.begin(), reported.end(), '\n'), 1) << l.err;
  const int rank = reported[14] - '0';
  EXPECT_TRUE(rank >= 0 && rank <= 2) << reported;
  if (l.code == 137) {
    EXPECT_EQ(reported.substr(0, reported.find(';')), fmt::format("dptrain: rank {} was killed by signal 9 (SIGKILL)", rank));
  } else {
    EXPECT_EQ(l.code, 2) << l.err;
    EXPECT_EQ(reported.substr(0, reported.find(';')), fmt::format("dptrain: rank {} exited with status 2", rank));
    EXPECT_NE(l.err.find("config.toml"), std::string::npos) << l.err;
  }
}

TEST_F(LocalLauncher, DptrainBadCfgFailsOnceBeforeLaunching) {
  ASSERT_TRUE(fs::exists(dptrain_path())) << "build the dptrain target first (ninja dptrain)";
  const std::string cfg = (dir_ / "bad.cfg").string();
  std::ofstream(cfg) << "[trian]\nsteps = 1\n";
  auto l = run_dptrain(dir_, {"--nproc=3", cfg});
  EXPECT_EQ(l.code, 2);
  EXPECT_EQ(std::count(l.err.begin(), l.err.end(), '\n'), 1) << l.err;
  EXPECT_EQ(l.err.rfind("dptrain: error: " + cfg + ":1: unknown section", 0), 0u) << l.err;
}

}  // namespace
}  // namespace dp::launch
