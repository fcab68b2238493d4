// defines: AsyncWriter, one background job at a time (the checkpoint's file, launch/checkpoint_saver.h).
//
// start() runs a job on a thread of its own; wait() blocks until it has finished and hands over its
// outcome, its exception included: the thread never lets one escape (STYLE.md 6), the waiter gets
// it. poll() is wait() for a job that has finished already, without blocking. The destructor waits
// for a job in flight (whose outcome nobody collected then: the owner waits first).
#pragma once
#include <atomic>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <thread>

namespace dp {

class AsyncWriter {
 public:
  struct Outcome {
    std::string what;          // the label start() was given
    std::exception_ptr error;  // null: the job succeeded
    double seconds = 0;        // the job's own run time
  };

  AsyncWriter() = default;
  ~AsyncWriter();
  AsyncWriter(const AsyncWriter&) = delete;
  AsyncWriter& operator=(const AsyncWriter&) = delete;

  // A job was started and its outcome is not collected yet.
  bool busy() const { return thread_.joinable(); }
  // Starts `job` on a new thread. Only when not busy() (DpError otherwise: wait first).
  void start(std::string what, std::function<void()> job);
  // The outcome of the job started last, once it has finished; nullopt when there is none to collect.
  std::optional<Outcome> wait();
  // The same when the job has finished already; nullopt while it runs (or when there is none).
  std::optional<Outcome> poll();

 private:
  std::thread thread_;
  std::atomic<bool> done_{false};  // release by the thread after outcome_ is written
  Outcome outcome_;
};

}  // namespace dp
