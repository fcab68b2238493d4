#include "runtime/checkpoint/async_writer.h"

#include <chrono>

#include "base/error.h"

namespace dp {

AsyncWriter::~AsyncWriter() {
  if (thread_.joinable()) thread_.join();
}

void AsyncWriter::start(std::string what, std::function<void()> job) {
  DP_CHECK(!busy(), "AsyncWriter::start('{}') while '{}' is not collected: wait() first", what, outcome_.what);
  outcome_ = Outcome{std::move(what), nullptr, 0};
  done_.store(false, std::memory_order_relaxed);
  thread_ = std::thread([this, job = std::move(job)] {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      job();
    } catch (...) {  // every exception, for the waiter: none may leave a thread (std::terminate)
      outcome_.error = std::current_exception();
    }
    outcome_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    done_.store(true, std::memory_order_release);
  });
}

std::optional<AsyncWriter::Outcome> AsyncWriter::wait() {
  if (!thread_.joinable()) return std::nullopt;
  thread_.join();
  return std::move(outcome_);
}

std::optional<AsyncWriter::Outcome> AsyncWriter::poll() {
  if (!thread_.joinable() || !done_.load(std::memory_order_acquire)) return std::nullopt;
  return wait();
}

}  // namespace dp
