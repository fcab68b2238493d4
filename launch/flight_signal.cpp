#include "launch/flight_signal.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <csignal>

#include "base/error.h"
#include "runtime/log.h"

namespace dp::launch {
namespace {

std::atomic<int> g_write_fd{-1};

void on_usr2(int) {
  const int saved = errno;
  const int fd = g_write_fd.load();
  const char one = 1;
  if (fd >= 0) (void)!::write(fd, &one, 1);
  errno = saved;
}

constexpr char kStop = 0;  // written by the destructor: the thread ends

}  // namespace

FlightSignal::FlightSignal(Communicator& comm) : comm_(comm) {
  CHECK_SYS(::pipe2(pipe_, O_CLOEXEC | O_NONBLOCK));
  g_write_fd.store(pipe_[1]);
  struct sigaction sa {};
  sa.sa_handler = on_usr2;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  CHECK_SYS(::sigaction(SIGUSR2, &sa, &old_));
  thread_ = std::thread([this] { loop(); });
}

FlightSignal::~FlightSignal() {
  ::sigaction(SIGUSR2, &old_, nullptr);
  g_write_fd.store(-1);
  (void)!::write(pipe_[1], &kStop, 1);
  if (thread_.joinable()) thread_.join();
  ::close(pipe_[0]);
  ::close(pipe_[1]);
}

// Never throws (a thread): the recorder's write() logs its own failures.
void FlightSignal::loop() {
  while (true) {
    pollfd p{pipe_[0], POLLIN, 0};
    if (::poll(&p, 1, -1) < 0 && errno != EINTR) return;
    char buf[64];
    ssize_t n = ::read(pipe_[0], buf, sizeof buf);
    bool asked = false;
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] == kStop) return;
      asked = true;
    }
    if (asked) comm_.write_flight_record("SIGUSR2 received: the record was asked for; training goes on");
  }
}

}  // namespace dp::launch
