// defines: DynLib (a shared library opened at run time, so the binary runs where it is absent)
// and call_with_deadline (a blocking library call that has no timeout of its own, bounded).
#pragma once
#include <dlfcn.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace dp {

class DynLib {
 public:
  // Tries each name in turn; handle() is null when none loads (error() then says why).
  explicit DynLib(const std::vector<std::string>& names) {
    for (const auto& n : names) {
      // RTLD_GLOBAL: PMIx loads its own plugins, which resolve symbols of the library itself.
      handle_ = ::dlopen(n.c_str(), RTLD_NOW | RTLD_GLOBAL);
      if (handle_) {
        name_ = n;
        return;
      }
      const char* e = ::dlerror();
      error_ += (error_.empty() ? "" : "; ") + std::string(e ? e : n + ": not found");
    }
  }
  // Never dlclose'd: the libraries keep threads and atexit handlers of their own.
  DynLib(const DynLib&) = delete;
  DynLib& operator=(const DynLib&) = delete;
  void* handle() const { return handle_; }
  const std::string& name() const { return name_; }
  const std::string& error() const { return error_; }
  // The symbol as a function pointer of type F, or nullptr.
  template <class F>
  F sym(const char* symbol) const {
    return handle_ ? reinterpret_cast<F>(::dlsym(handle_, symbol)) : nullptr;
  }

 private:
  void* handle_ = nullptr;
  std::string name_, error_;
};

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
