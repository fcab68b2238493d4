#include "launch/local_launcher.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <optional>
#include <thread>

#include "collectives/bootstrap/job_token.h"
#include "collectives/bootstrap/tcp_store.h"
#include "launch/signal_thread.h"
#include "launch/stop_signals.h"
#include "base/error.h"

extern char** environ;

namespace dp::launch {

std::vector<std::string> worker_args_of(int argc, const char* const* argv) {
  std::vector<std::string> out;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--nproc" || a == "--max-restarts") ++i;
    else if (a.rfind("--nproc=", 0) != 0 && a.rfind("--max-restarts=", 0) != 0) out.push_back(a);
  }
  return out;
}

namespace {

using Clock = std::chrono::steady_clock;

// ---- signals reach the loop through a self-pipe: the signal thread (launch/signal_thread.h)
// writes SIGINT, SIGTERM, SIGUSR1, SIGUSR2 (the flight record's, forwarded like the stop
// signals) and SIGCHLD there as one byte each; no handler runs in this process ----

// Routes the signals to the pipe (and ignores SIGPIPE: a closed stdout must not kill the launcher
// and orphan its workers); restores what was there on destruction. Once the destructor returns
// nothing writes to the pipe (the signal thread writes under the lock that unsets it).
class SignalRouting {
 public:
  explicit SignalRouting(int pipe_w) {
    start_signal_thread();
    set_launcher_fd(pipe_w);
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    ::sigaction(SIGPIPE, &ign, &old_pipe_);
  }
  ~SignalRouting() {
    set_launcher_fd(-1);
    ::sigaction(SIGPIPE, &old_pipe_, nullptr);
  }
  SignalRouting(const SignalRouting&) = delete;
  SignalRouting& operator=(const SignalRouting&) = delete;

 private:
  struct sigaction old_pipe_ {};
};

// A port free on 127.0.0.1 a moment ago (rank 0 binds it with SO_REUSEADDR right after).
int free_port() {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  CHECK_SYS(fd.get());
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK_SYS(::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a));
  socklen_t len = sizeof a;
  CHECK_SYS(::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len));
  return ntohs(a.sin_port);
}

void write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 100);
      continue;
    }
    if (n <= 0) return;  // our own output is gone (EPIPE): keep supervising anyway
    off += static_cast<size_t>(n);
  }
}

// One worker's stdout or stderr: whole lines are forwarded with the rank prefix, in one write
// each, so lines of different workers never mix.
struct Stream {
  UniqueFd fd;
  int out_fd = 1;
  std::string partial;

  void feed(const std::string& prefix, const char* data, size_t n, bool eof) {
    partial.append(data, n);
    std::string out;
    size_t start = 0;
    for (size_t nl; (nl = partial.find('\n', start)) != std::string::npos; start = nl + 1) {
      out += prefix;
      out.append(partial, start, nl - start + 1);
    }
    partial.erase(0, start);
    // A line without its end at EOF, or one longer than 64 KiB, goes out as it is.
    if (!partial.empty() && (eof || partial.size() > (64u << 10))) {
      out += prefix + partial + "\n";
      partial.clear();
    }
    if (!out.empty()) write_all(out_fd, out);
  }
};

struct Worker {
  pid_t pid = -1;
  bool running = false;
  Stream out, err;
};

// Only async-signal-safe calls between fork and exec (the parent may have OpenMP threads).
[[noreturn]] void exec_worker(const char* exe, char* const* argv, char* const* envp, int out_w, int err_w,
                              pid_t launcher, const char* fail_msg, size_t fail_len) {
  for (int sig : {SIGINT, SIGTERM, SIGUSR1, SIGCHLD, SIGPIPE}) ::signal(sig, SIG_DFL);
  ::signal(SIGUSR2, SIG_IGN);  // until the worker's main() blocks it (kept across exec)
  // The launcher's mask blocks the signals its signal thread takes: the worker starts with only
  // SIGUSR1 blocked, through exec until the worker's main() takes it (pending, not fatal).
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  ::sigprocmask(SIG_SETMASK, &usr1, nullptr);
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != launcher) ::_exit(127);  // the launcher died before prctl
  int devnull = ::open("/dev/null", O_RDONLY);
  if (devnull >= 0) ::dup2(devnull, 0);
  ::dup2(out_w, 1);
  ::dup2(err_w, 2);
  ::execve(exe, argv, envp);
  [[maybe_unused]] ssize_t n = ::write(2, fail_msg, fail_len);
  ::_exit(127);
}

// The environment every worker shares: ours minus the variables we set, plus them.
// OMP_NUM_THREADS, unless given, shares the cores between the workers (N workers each using
// every core would thrash).
std::vector<std::string> shared_env(int nproc, int port, int restart) {
  const std::vector<std::string> ours = {"RANK",        "WORLD_SIZE",  "LOCAL_RANK",        "LOCAL_WORLD_SIZE",
                                         "GROUP_RANK",  "MASTER_ADDR", "MASTER_PORT",       "DPTRAIN_JOB_TOKEN",
                                         "DPTRAIN_RESTART_COUNT"};
  std::vector<std::string> base;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const std::string name = kv.substr(0, kv.find('='));
    if (std::find(ours.begin(), ours.end(), name) == ours.end()) base.push_back(kv);
  }
  if (std::getenv("OMP_NUM_THREADS") == nullptr) {
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    base.push_back(fmt::format("OMP_NUM_THREADS={}", std::max(1u, cores / static_cast<unsigned>(nproc))));
  }
  base.push_back(fmt::format("WORLD_SIZE={}", nproc));
  base.push_back(fmt::format("LOCAL_WORLD_SIZE={}", nproc));
  base.push_back("GROUP_RANK=0");
  base.push_back("MASTER_ADDR=127.0.0.1");
  base.push_back(fmt::format("MASTER_PORT={}", port));
  // A fresh secret per launch: only these workers can use their store and ring listeners, and a
  // second launch that picked the same port is refused by name instead of joining.
  base.push_back("DPTRAIN_JOB_TOKEN=" + make_job_token());
  if (restart > 0) base.push_back(fmt::format("DPTRAIN_RESTART_COUNT={}", restart));
  return base;
}

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// The N workers of one run_local call and the loop that supervises them: their output
// forwarded with rank prefixes, signals forwarded, a failed worker stopping the others,
// SIGKILL after the grace period.
class LocalJob {
 public:
  LocalJob(int nproc, const std::vector<std::string>& worker_args, const LocalLaunchOptions& opt, int sig_r)
      : opt_(opt), sig_r_(sig_r), workers_(static_cast<size_t>(nproc)) {
    args_ = {opt.exe};
    args_.insert(args_.end(), worker_args.begin(), worker_args.end());
  }
  ~LocalJob() {
    if (!spawned_) {  // spawning failed part way: none of the started workers may outlive us
      kill_all(SIGKILL);
      for (auto& w : workers_)
        if (w.running) ::waitpid(w.pid, nullptr, 0);
    }
  }
  LocalJob(const LocalJob&) = delete;
  LocalJob& operator=(const LocalJob&) = delete;

  void spawn(const std::vector<std::string>& base_env) {
    std::vector<char*> argv;
    for (auto& a : args_) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string fail_msg = fmt::format("dptrain: cannot execute '{}'\n", opt_.exe);
    for (int r = 0; r < static_cast<int>(workers_.size()); ++r) spawn_one(r, base_env, argv, fail_msg);
    spawned_ = true;
  }

  // The worker whose failure stopped the job (none: every worker exited 0).
  const std::optional<WorkerExit>& failure() const { return failure_; }
  // Whether SIGINT or SIGTERM reached us: the workers stop as asked, not for a restart.
  int stop_signal() const { return stop_signal_; }

  // Until every worker is gone and its output drained; the failed worker's status.
  int supervise() {
    std::optional<Clock::time_point> drain_until;
    while (true) {
      const auto now = Clock::now();
      const bool all_done = std::none_of(workers_.begin(), workers_.end(), [](const Worker& w) { return w.running; });
      const bool all_closed =
          std::none_of(workers_.begin(), workers_.end(), [](const Worker& w) { return w.out.fd || w.err.fd; });
      // A worker's own child may keep its pipes open after it exits: wait for them 1 s at most.
      if (all_done && !drain_until) drain_until = now + std::chrono::seconds(1);
      if (all_done && (all_closed || now >= *drain_until)) break;
      poll_once();
      reap();
      escalate();
    }
    return failure_ ? failure_->status : 0;
  }

 private:
  void spawn_one(int r, const std::vector<std::string>& base_env, std::vector<char*>& argv,
                 const std::string& fail_msg) {
    Worker& w = workers_[static_cast<size_t>(r)];
    std::vector<std::string> env = base_env;
    env.push_back(fmt::format("RANK={}", r));
    env.push_back(fmt::format("LOCAL_RANK={}", r));
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    int po[2], pe[2];
    CHECK_SYS(::pipe2(po, O_CLOEXEC));
    w.out.fd = UniqueFd(po[0]);
    UniqueFd out_w(po[1]);
    CHECK_SYS(::pipe2(pe, O_CLOEXEC));
    w.err.fd = UniqueFd(pe[0]);
    UniqueFd err_w(pe[1]);
    w.out.out_fd = 1;
    w.err.out_fd = 2;
    const pid_t pid = ::fork();
    CHECK_SYS(pid);
    if (pid == 0)
      exec_worker(opt_.exe.c_str(), argv.data(), envp.data(), out_w.get(), err_w.get(), self_, fail_msg.data(),
                  fail_msg.size());
    ::setpgid(pid, pid);  // also done by the child: whichever runs first, no signal misses the group
    w.pid = pid;
    w.running = true;
    CHECK_SYS(::fcntl(w.out.fd.get(), F_SETFL, O_NONBLOCK));
    CHECK_SYS(::fcntl(w.err.fd.get(), F_SETFL, O_NONBLOCK));
  }

  // Signals go to a worker's whole process group (as a terminal's would): its own children too.
  void kill_all(int sig) {
    for (auto& w : workers_)
      if (w.running && ::kill(-w.pid, sig) != 0) ::kill(w.pid, sig);
  }

  // Waits up to 100 ms for a signal or worker output, and handles what came.
  void poll_once() {
    pfds_.clear();
    who_.clear();
    pfds_.push_back({sig_r_, POLLIN, 0});
    for (size_t r = 0; r < workers_.size(); ++r)
      for (Stream* s : {&workers_[r].out, &workers_[r].err})
        if (s->fd) {
          pfds_.push_back({s->fd.get(), POLLIN, 0});
          who_.emplace_back(r, s);
        }
    ::poll(pfds_.data(), pfds_.size(), 100);
    if (pfds_[0].revents & POLLIN) forward_signals();
    for (size_t i = 1; i < pfds_.size(); ++i)
      if (pfds_[i].revents) forward_output(who_[i - 1].first, *who_[i - 1].second);
  }

  void forward_signals() {
    unsigned char sigs[64];
    ssize_t n;
    while ((n = ::read(sig_r_, sigs, sizeof sigs)) > 0)
      for (ssize_t i = 0; i < n; ++i) {
        const int sig = sigs[i];
        if (sig == SIGCHLD) continue;  // reaped in reap()
        kill_all(sig);
        if (sig == SIGINT || sig == SIGTERM) stop_signal_ = sig;
        if ((sig == SIGINT || sig == SIGTERM) && !kill_at_) kill_at_ = Clock::now() + seconds(opt_.grace_s);
      }
  }

  void forward_output(size_t r, Stream& s) {
    const std::string prefix = fmt::format("[rank {}] ", r);
    while (true) {
      ssize_t n = ::read(s.fd.get(), buf_, sizeof buf_);
      if (n > 0) {
        s.feed(prefix, buf_, static_cast<size_t>(n), false);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      s.feed(prefix, buf_, 0, true);  // EOF (or error): flush the last partial line
      s.fd.reset();
      break;
    }
  }

  // Collects exited workers; the first failure stops the others (SIGTERM, then the grace period).
  // Of workers that failed together, the cause is the one that did not just lose a peer.
  void reap() {
    std::vector<WorkerExit> failed;
    for (size_t r = 0; r < workers_.size(); ++r) {
      Worker& w = workers_[r];
      if (!w.running) continue;
      int st = 0;
      if (::waitpid(w.pid, &st, WNOHANG) != w.pid) continue;
      w.running = false;
      const WorkerExit e = worker_exit_of(static_cast<int>(r), st);
      if (e.status != 0) failed.push_back(e);
    }
    if (failed.empty() || failure_) return;
    failure_ = failure_cause(failed);
    const auto left = std::count_if(workers_.begin(), workers_.end(), [](const Worker& o) { return o.running; });
    write_all(2, fmt::format("dptrain: rank {} {}{}\n", failure_->rank, describe_exit(*failure_),
                             left > 0 ? fmt::format("; stopping the other {} worker{}", left, left > 1 ? "s" : "")
                                      : std::string()));
    kill_all(SIGTERM);
    const auto at = Clock::now() + seconds(opt_.grace_s);
    if (!kill_at_ || at < *kill_at_) kill_at_ = at;
  }

  // SIGKILL for the workers still running when the grace period after SIGTERM is over.
  void escalate() {
    if (!kill_at_ || killed_ || Clock::now() < *kill_at_) return;
    for (size_t r = 0; r < workers_.size(); ++r)
      if (workers_[r].running)
        write_all(2, fmt::format("dptrain: rank {} did not stop within {:g} s of SIGTERM: killing it\n", r, opt_.grace_s));
    kill_all(SIGKILL);
    killed_ = true;
  }

  const LocalLaunchOptions& opt_;
  const int sig_r_;
  const pid_t self_ = ::getpid();
  std::vector<std::string> args_;
  std::vector<Worker> workers_;
  bool spawned_ = false;
  std::optional<WorkerExit> failure_;
  int stop_signal_ = 0;
  std::optional<Clock::time_point> kill_at_;
  bool killed_ = false;
  std::vector<pollfd> pfds_;
  std::vector<std::pair<size_t, Stream*>> who_;
  char buf_[1 << 16];
};

std::string host_name() {
  char h[256] = {};
  return ::gethostname(h, sizeof h - 1) == 0 ? std::string(h) : std::string("?");
}

// After a failed launch that is not restarted: why not, in one line (only when restarts were
// allowed: with --max-restarts 0 the failure line says all there is).
void say_why_not_restarting(RestartVerdict v, const WorkerExit& f, const LocalLaunchOptions& opt, int restarts) {
  if (opt.max_restarts <= 0) return;
  std::string why;
  switch (v) {
    case RestartVerdict::NotRetriable:
      why = fmt::format("not restarting: rank {} {}, a cfg or input error that every attempt would repeat", f.rank,
                        describe_exit(f));
      break;
    case RestartVerdict::Exhausted:
      why = fmt::format("rank {} {} after {} restart{} (--max-restarts {}): giving up", f.rank, describe_exit(f),
                        restarts, restarts == 1 ? "" : "s", opt.max_restarts);
      break;
    case RestartVerdict::StopRequested: why = "not restarting: the launcher was asked to stop"; break;
    case RestartVerdict::Restart: return;
  }
  write_all(2, fmt::format("dptrain: {}; exiting with status {}\n", why, f.status));
}

// The line of one restart: the failure, where the job resumes (on_restart), the new launch.
void announce_restart(const RestartEvent& e, const LocalLaunchOptions& opt, int nproc) {
  const std::string details = opt.on_restart ? opt.on_restart(e) : std::string();
  write_all(2, fmt::format("dptrain: restart {} of {}: rank {} on {} {}{}; starting the {} worker{} again\n",
                           e.restart, e.max_restarts, e.failure.rank, e.host, describe_exit(e.failure),
                           details.empty() ? "" : "; " + details, nproc, nproc > 1 ? "s" : ""));
}

// One launch of the N workers, supervised to its end: its status, its failure, its stop signal.
struct LaunchOutcome {
  int status = 0;
  std::optional<WorkerExit> failure;
  int stop_signal = 0;
};

LaunchOutcome launch_once(int nproc, const std::vector<std::string>& args, const LocalLaunchOptions& opt, int sig_r,
                          int restart) {
  LocalJob job(nproc, args, opt, sig_r);
  job.spawn(shared_env(nproc, free_port(), restart));
  const int status = job.supervise();
  return {status, job.failure(), job.stop_signal()};
}

}  // namespace

int run_local(int nproc, const std::vector<std::string>& worker_args) {
  return run_local(nproc, worker_args, LocalLaunchOptions{});
}

int run_local(int nproc, const std::vector<std::string>& worker_args, const LocalLaunchOptions& opt) {
  DP_CHECK(nproc >= 1, "run_local: {} processes", nproc);
  int sp[2];
  CHECK_SYS(::pipe2(sp, O_CLOEXEC | O_NONBLOCK));
  UniqueFd sig_r(sp[0]), sig_w(sp[1]);
  SignalRouting routing(sig_w.get());
  // A SIGUSR1 that came before the routing (caught since main()) goes to the workers too.
  if (StopRequest::received() == SIGUSR1) {
    const unsigned char b = SIGUSR1;
    [[maybe_unused]] ssize_t n = ::write(sig_w.get(), &b, 1);
  }
  const std::string host = host_name();
  for (int restarts = 0;; ++restarts) {
    const LaunchOutcome o =
        launch_once(nproc, restarts == 0 ? worker_args : restart_args(worker_args), opt, sig_r.get(), restarts);
    if (!o.failure) return o.status;
    const RestartVerdict v = restart_verdict(*o.failure, restarts, opt.max_restarts, o.stop_signal != 0);
    if (v != RestartVerdict::Restart) {
      say_why_not_restarting(v, *o.failure, opt, restarts);
      return o.status;
    }
    announce_restart(RestartEvent{restarts + 1, opt.max_restarts, *o.failure, host}, opt, nproc);
  }
}

}  // namespace dp::launch
