// defines: the process's signal thread: the asynchronous signals dptrain acts on (SIGUSR1,
// SIGTERM, SIGINT, SIGUSR2, and SIGCHLD for the local launcher) never run a handler; they are blocked in every thread from main()'s
// first line (a thread inherits its creator's mask) and one thread of our own takes them with
// sigwaitinfo(2) and acts in ordinary code; plus what the rest of the program tells it
// (a stop request is live, where the flight record's byte goes, the launcher's pipe), and
// signal_action, the pure rule that decides.
//
// Why (issue 28): a handler runs on the stack of whichever thread the kernel picks, below its
// stack pointer. oneDNN's AVX2 sgemm kernels (Debian's 2.6.3: the f32 matmul and the GEMM-based
// primitives where AVX-512 kernels are missing) point rsp into a heap buffer while they run, so a
// SIGTERM that landed on the training thread at that moment wrote its signal frame over the heap
// below that buffer: glibc aborted later, in the checkpoint the signal was asking for ("free():
// invalid size", "corrupted size vs. prev_size"). No thread that computes ever receives a signal
// now, whatever the libraries do with their stacks.
#pragma once

namespace dp::launch {

// What the signal thread does with a signal (pure: signal_action).
enum class SignalAction {
  RecordStop,   // remember it; the training loop stops every rank after the same step
  FlightByte,   // SIGUSR2: one byte to the flight recorder's pipe
  ToLauncher,   // the local launcher's pipe: it forwards the signal to its workers (SIGCHLD: reaps)
  Terminate,    // the signal's default action: the process ends as killed by it
  Ignore,
};

struct SignalState {
  bool launcher = false;     // a local launcher routes signals to its pipe
  bool stop_caught = false;  // a StopRequest lives (the training loop)
  bool flight = false;       // a FlightSignal lives
};

SignalAction signal_action(int sig, const SignalState& s);

// main(): blocks the five signals in the calling thread (and so in every thread it starts
// later), and gives SIGUSR2 its default disposition (an ignored signal is discarded, never
// queued for sigwaitinfo; blocked, the default is harmless). Before anything that may start a
// thread or re-execute the program: a signal in between stays pending.
void block_handled_signals();
// Starts the thread that takes them (idempotent); blocks them in the calling thread first.
void start_signal_thread();

// Precedence of the stop signals: SIGUSR1 3, SIGTERM 2, SIGINT 1, anything else 0 (pure).
int stop_rank_of(int sig);
int stop_signal_of_rank(int rank);

// The highest-ranked stop signal received so far (SIGUSR1 > SIGTERM > SIGINT), 0 if none.
int stop_signal_received();
// While true (a StopRequest lives), SIGTERM and SIGINT are recorded instead of ending the process.
void set_stop_signals_caught(bool caught);
// SIGUSR2 writes one byte to fd while fd >= 0 (FlightSignal); ignored otherwise.
void set_flight_fd(int fd);
// While fd >= 0, the five signals go to the launcher as one byte each (the signal's number).
void set_launcher_fd(int fd);

}  // namespace dp::launch
