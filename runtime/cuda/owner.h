// defines: Owner<Handle, Destroy>, the move-only owner of one CUDA or CUDA-library handle, and
// DP_CUDA_DESTROY, which names a library's destroy call as an Owner's Destroy. Every owner in
// runtime/cuda/ (streams, events, buffers, library handles, descriptors) is an Owner, or a thin
// class over one that adds the handle's own methods.
//
// tiny-cuda-nn's habit: the destructor never throws; a failed destroy is logged (subsystem
// "cuda", runtime/cuda/log_failure.h; an owner of a cuBLAS or cuDNN handle also includes
// log_library_failure.h) and otherwise ignored, so an owner can be destroyed during
// stack unwinding. A moved-from or default-constructed owner is empty (its handle Handle{}) and
// its destruction is a no-op.
#pragma once
#include <utility>

#include "runtime/cuda/log_failure.h"

// Destroy for an Owner whose Handle the library call `fn` destroys: `fn(handle)` returns the
// call's status, and `what` names the call in the log line of a failure.
#define DP_CUDA_DESTROY(Name, fn)                                   \
  struct Name {                                                     \
    static constexpr const char* what = #fn;                        \
    template <typename H>                                           \
    auto operator()(H h) const noexcept { return fn(h); }           \
  }

namespace dp::cuda {

// Handle: a raw handle (a pointer type), or a small struct carrying what its destruction needs
// (a buffer's stream and size) that converts to bool: true while it holds something.
// Destroy: a stateless function object, Destroy{}(handle) -> a CUDA, cuBLAS or cuDNN status, with
// a `what` naming the call (DP_CUDA_DESTROY makes one).
template <typename Handle, typename Destroy>
class Owner {
 public:
  Owner() = default;
  // Takes ownership of h (the caller created it).
  explicit Owner(Handle h) noexcept : h_(h) {}
  ~Owner() { reset(); }
  Owner(Owner&& o) noexcept : h_(std::exchange(o.h_, Handle{})) {}
  Owner& operator=(Owner&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, Handle{});
    }
    return *this;
  }
  Owner(const Owner&) = delete;
  Owner& operator=(const Owner&) = delete;

  const Handle& get() const { return h_; }
  explicit operator bool() const { return static_cast<bool>(h_); }
  // Destroys the handle now (logging a failure); the owner is empty afterwards.
  void reset() noexcept {
    if (h_) ReleaseLog<decltype(Destroy{}(h_))>::log(Destroy{}(h_), Destroy::what);
    h_ = Handle{};
  }

 private:
  Handle h_{};
};

}  // namespace dp::cuda
