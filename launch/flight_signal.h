// defines: FlightSignal: while it lives, SIGUSR2 makes this process write its communicator's
// flight record (<run>/flight/rank-<r>.json, collectives/flight_recorder.h) and training goes
// on, so that a job that seems stuck can be asked where every rank is without stopping it:
//   scancel --signal=USR2 <job>      or      kill -USR2 <pid of each rank>
//   tools/flightrec runs/<name>
// The signal thread (launch/signal_thread.h) writes a byte to a pipe; a thread of this class waits
// on the pipe and writes the file, whatever the training thread is doing (stuck in a collective,
// most likely, when someone asks).
#pragma once
#include <thread>

#include "collectives/communicator.h"

namespace dp::launch {

class FlightSignal {
 public:
  // One at a time per process. `comm` outlives it.
  explicit FlightSignal(Communicator& comm);
  // SIGUSR2 is ignored again; stops the thread.
  ~FlightSignal();
  FlightSignal(const FlightSignal&) = delete;
  FlightSignal& operator=(const FlightSignal&) = delete;

 private:
  void loop();
  Communicator& comm_;
  int pipe_[2] = {-1, -1};
  std::thread thread_;
};

}  // namespace dp::launch
