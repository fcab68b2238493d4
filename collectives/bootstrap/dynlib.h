// defines: call_with_deadline (a blocking library call that has no timeout of its own, bounded);
// DynLib (base/dynlib.h) with it, for the bootstrap's PMIx and PMI2 libraries.
#pragma once
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/dynlib.h"

namespace dp {

// Runs fn() on a helper thread and waits up to timeout_s. Returns its result, or nullopt when it
// did not return in time: the thread is then left behind, still blocked in the library, which is
// why fn must own everything it touches (capture by value). The caller reports the timeout and
// the process exits; nothing else can unblock a collective of an external library.
// on_slow, if given, is called once when fn has not returned after slow_after_s seconds (a
// waiting rank says so instead of staying silent until the timeout).
template <class R, class F>
std::optional<R> call_with_deadline(F fn, double timeout_s, const std::function<void()>& on_slow = {},
                                    double slow_after_s = 0) {
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<R> result;
  };
  auto st = std::make_shared<State>();
  std::thread([st, fn = std::move(fn)]() mutable {
    R r = fn();
    std::lock_guard lock(st->mu);
    st->result = std::move(r);
    st->cv.notify_all();
  }).detach();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                              std::chrono::duration<double>(timeout_s));
  std::unique_lock lock(st->mu);
  if (on_slow && slow_after_s < timeout_s) {
    if (st->cv.wait_for(lock, std::chrono::duration<double>(slow_after_s), [&] { return st->result.has_value(); }))
      return st->result;
    lock.unlock();
    on_slow();
    lock.lock();
  }
  st->cv.wait_until(lock, deadline, [&] { return st->result.has_value(); });
  return st->result;
}

}  // namespace dp
