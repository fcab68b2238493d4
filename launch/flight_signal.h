// defines: FlightSignal: while it lives, SIGUSR2 makes this process write its communicator's
// flight record (<run>/flight/rank-<r>.json, collectives/flight_recorder.h) and training goes
// on, so that a job that seems stuck can be asked where every rank is without stopping it:
//   scancel --signal=USR2 <job>      or      kill -USR2 <pid of each rank>
//   tools/flightrec runs/<name>
// The handler only writes a byte to a pipe (a signal handler may not allocate or take locks); a
// thread of its own waits on the pipe and writes the file, whatever the training thread is
// doing (stuck in a collective, most likely, when someone asks).
#pragma once
#include <csignal>
#include <thread>

#include "collectives/communicator.h"

namespace dp::launch {

class FlightSignal {
 public:
  // One at a time per process. `comm` outlives it.
  explicit FlightSignal(Communicator& comm);
  // Restores the previous SIGUSR2 action and stops the thread.
  ~FlightSignal();
  FlightSignal(const FlightSignal&) = delete;
  FlightSignal& operator=(const FlightSignal&) = delete;

 private:
  void loop();
  Communicator& comm_;
  int pipe_[2] = {-1, -1};
  struct sigaction old_ {};
  std::thread thread_;
};

}  // namespace dp::launch
