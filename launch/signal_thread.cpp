#include "launch/signal_thread.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <mutex>
#include <thread>


namespace dp::launch {
namespace {

constexpr int kHandled[] = {SIGUSR1, SIGTERM, SIGINT, SIGUSR2, SIGCHLD};

sigset_t handled_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kHandled) sigaddset(&set, sig);
  return set;
}

std::atomic<int> g_received{0};          // the highest-ranked stop signal so far
std::atomic<bool> g_stop_caught{false};  // a StopRequest lives
std::atomic<unsigned> g_ignored{0};      // bit per signal: ignored when this program started
std::mutex g_fd_mu;                      // the fds below: set and written under it
int g_flight_fd = -1, g_launcher_fd = -1;

bool ignored_at_start(int sig) { return (g_ignored.load() >> sig) & 1u; }

void record_stop(int sig) {
  int cur = g_received.load();
  while (stop_rank_of(sig) > stop_rank_of(cur) && !g_received.compare_exchange_weak(cur, sig)) {
  }
}

void write_byte(int fd, unsigned char b) {
  while (::write(fd, &b, 1) < 0 && errno == EINTR) {
  }
}

// The signal's default action, now, from this thread: the process ends as killed by `sig`.
void terminate_by(int sig) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  ::pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  ::raise(sig);
}

void act(int sig) {
  std::lock_guard lock(g_fd_mu);
  const SignalState s{g_launcher_fd >= 0, g_stop_caught.load(), g_flight_fd >= 0};
  switch (signal_action(sig, s)) {
    case SignalAction::RecordStop: return record_stop(sig);
    case SignalAction::FlightByte: return write_byte(g_flight_fd, 1);
    case SignalAction::ToLauncher: return write_byte(g_launcher_fd, static_cast<unsigned char>(sig));
    case SignalAction::Terminate:
      if (!ignored_at_start(sig)) terminate_by(sig);
      return;
    case SignalAction::Ignore: return;
  }
}

// Never returns, never throws; detached: the process's exit ends it. Named, so that ps and the
// tests can tell it (while it waits, the kernel shows the four signals unblocked in it).
void loop(sigset_t set) {
  ::pthread_setname_np(::pthread_self(), "dp-signals");
  while (true) {
    siginfo_t info;
    const int sig = ::sigwaitinfo(&set, &info);
    if (sig > 0) act(sig);
  }
}

}  // namespace

int stop_rank_of(int sig) {
  if (sig == SIGUSR1) return 3;
  if (sig == SIGTERM) return 2;
  if (sig == SIGINT) return 1;
  return 0;
}

int stop_signal_of_rank(int rank) {
  switch (rank) {
    case 3: return SIGUSR1;
    case 2: return SIGTERM;
    case 1: return SIGINT;
    default: return 0;
  }
}

SignalAction signal_action(int sig, const SignalState& s) {
  if (sig == SIGCHLD) return s.launcher ? SignalAction::ToLauncher : SignalAction::Ignore;
  if (sig != SIGUSR1 && sig != SIGTERM && sig != SIGINT && sig != SIGUSR2) return SignalAction::Ignore;
  if (s.launcher) return SignalAction::ToLauncher;
  if (sig == SIGUSR2) return s.flight ? SignalAction::FlightByte : SignalAction::Ignore;
  if (sig == SIGUSR1 || s.stop_caught) return SignalAction::RecordStop;
  return SignalAction::Terminate;
}

void block_handled_signals() {
  const sigset_t set = handled_set();
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // Queued for sigwaitinfo only if not ignored: the default disposition, harmless while blocked
  // (and SIGCHLD's SIG_IGN would reap the children before waitpid sees them).
  // One that this program was started with ignored (SIGINT of a background job) stays ignored
  // outside the training loop, as before.
  unsigned ignored = 0;
  for (int sig : kHandled) {
    struct sigaction old {};
    ::sigaction(sig, nullptr, &old);
    if (old.sa_handler == SIG_IGN && sig != SIGUSR2 && sig != SIGCHLD) ignored |= 1u << sig;
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ::sigaction(sig, &dfl, nullptr);
  }
  g_ignored.store(g_ignored.load() | ignored);
}

void start_signal_thread() {
  // Once per process: a child forked after the start has the flag but not the thread.
  static std::mutex mu;
  static pid_t started_in = 0;
  std::lock_guard lock(mu);
  if (started_in == ::getpid()) return;
  block_handled_signals();
  std::thread(loop, handled_set()).detach();
  started_in = ::getpid();
}

int stop_signal_received() { return g_received.load(); }
void set_stop_signals_caught(bool caught) { g_stop_caught.store(caught); }

void set_flight_fd(int fd) {
  std::lock_guard lock(g_fd_mu);
  g_flight_fd = fd;
}

void set_launcher_fd(int fd) {
  std::lock_guard lock(g_fd_mu);
  g_launcher_fd = fd;
}

}  // namespace dp::launch
