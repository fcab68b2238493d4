#include "kernels/cuda/emu/streams.h"

#include <chrono>
#include <mutex>
#include <unordered_set>

#include "kernels/cuda/emu/errors.h"

struct CUstream_st {
  unsigned int flags;
  int priority;
};

struct CUevent_st {
  unsigned int flags;
  bool recorded = false;
  std::chrono::steady_clock::time_point when;
};

namespace dp::emu {
namespace {

// Live handles, shared by all host threads (a stream may be created on one and used on another).
struct Handles {
  std::mutex mu;
  std::unordered_set<const void*> live;
  void add(const void* h) {
    std::lock_guard lock(mu);
    live.insert(h);
  }
  bool remove(const void* h) {
    std::lock_guard lock(mu);
    return live.erase(h) == 1;
  }
  bool has(const void* h) {
    std::lock_guard lock(mu);
    return live.count(h) == 1;
  }
};

Handles& streams() {
  static Handles h;
  return h;
}
Handles& events() {
  static Handles h;
  return h;
}

// CUDA's range on sm_90: 0 (least) to -5 (greatest); requests are clamped into it.
constexpr int kLeastPriority = 0, kGreatestPriority = -5;

cudaError_t check_event(cudaEvent_t e, const char* call) {
  if (e != nullptr && events().has(e)) return cudaSuccess;
  return api_error(cudaErrorInvalidResourceHandle, call, "the event was never created or is already destroyed");
}

}  // namespace

cudaError_t check_stream(cudaStream_t s, const char* call) {
  if (s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread || streams().has(s)) return cudaSuccess;
  return api_error(cudaErrorInvalidResourceHandle, call, "the stream was never created or is already destroyed");
}

}  // namespace dp::emu

using dp::emu::api_error;
using dp::emu::check_stream;

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned int flags, int priority) {
  if (s == nullptr) return api_error(cudaErrorInvalidValue, "cudaStreamCreate", "null stream pointer");
  if (priority > dp::emu::kLeastPriority) priority = dp::emu::kLeastPriority;
  if (priority < dp::emu::kGreatestPriority) priority = dp::emu::kGreatestPriority;
  *s = new CUstream_st{flags, priority};
  dp::emu::streams().add(*s);
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags) {
  return cudaStreamCreateWithPriority(s, flags, 0);
}
cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithPriority(s, cudaStreamDefault, 0); }

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (s == nullptr || !dp::emu::streams().remove(s))
    return api_error(cudaErrorInvalidResourceHandle, "cudaStreamDestroy", "not a live created stream");
  delete s;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (const cudaError_t e = check_stream(s, "cudaStreamSynchronize"); e != cudaSuccess) return e;
  return dp::emu::take_pending_fault();
}
cudaError_t cudaStreamQuery(cudaStream_t s) { return check_stream(s, "cudaStreamQuery"); }

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int) {
  if (const cudaError_t r = check_stream(s, "cudaStreamWaitEvent"); r != cudaSuccess) return r;
  return dp::emu::check_event(e, "cudaStreamWaitEvent");
}

cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  if (least) *least = dp::emu::kLeastPriority;
  if (greatest) *greatest = dp::emu::kGreatestPriority;
  return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void* user_data) {
  if (const cudaError_t e = check_stream(s, "cudaLaunchHostFunc"); e != cudaSuccess) return e;
  if (fn == nullptr) return api_error(cudaErrorInvalidValue, "cudaLaunchHostFunc", "null function");
  fn(user_data);
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() { return dp::emu::take_pending_fault(); }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int flags) {
  if (e == nullptr) return api_error(cudaErrorInvalidValue, "cudaEventCreate", "null event pointer");
  *e = new CUevent_st{flags};
  dp::emu::events().add(*e);
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t e) {
  if (e == nullptr || !dp::emu::events().remove(e))
    return api_error(cudaErrorInvalidResourceHandle, "cudaEventDestroy", "not a live event");
  delete e;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  if (const cudaError_t r = dp::emu::check_event(e, "cudaEventRecord"); r != cudaSuccess) return r;
  if (const cudaError_t r = check_stream(s, "cudaEventRecord"); r != cudaSuccess) return r;
  e->recorded = true;
  e->when = std::chrono::steady_clock::now();
  return cudaSuccess;
}

// An event never recorded counts as complete, as in CUDA.
cudaError_t cudaEventQuery(cudaEvent_t e) { return dp::emu::check_event(e, "cudaEventQuery"); }

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  if (const cudaError_t r = dp::emu::check_event(e, "cudaEventSynchronize"); r != cudaSuccess) return r;
  return dp::emu::take_pending_fault();
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (const cudaError_t r = dp::emu::check_event(start, "cudaEventElapsedTime"); r != cudaSuccess) return r;
  if (const cudaError_t r = dp::emu::check_event(end, "cudaEventElapsedTime"); r != cudaSuccess) return r;
  if (ms == nullptr) return api_error(cudaErrorInvalidValue, "cudaEventElapsedTime", "null result pointer");
  if ((start->flags | end->flags) & cudaEventDisableTiming)
    return api_error(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime",
                     "an event was created with cudaEventDisableTiming");
  if (!start->recorded || !end->recorded)
    return api_error(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime", "an event was never recorded");
  *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
  return cudaSuccess;
}
