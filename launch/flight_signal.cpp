#include "launch/flight_signal.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include "base/error.h"
#include "launch/signal_thread.h"
#include "runtime/log.h"

namespace dp::launch {
namespace {

constexpr char kStop = 0;  // written by the destructor: the thread ends

}  // namespace

FlightSignal::FlightSignal(Communicator& comm) : comm_(comm) {
  CHECK_SYS(::pipe2(pipe_, O_CLOEXEC | O_NONBLOCK));
  start_signal_thread();
  set_flight_fd(pipe_[1]);  // SIGUSR2 writes a 1 there
  thread_ = std::thread([this] { loop(); });
}

FlightSignal::~FlightSignal() {
  set_flight_fd(-1);
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
