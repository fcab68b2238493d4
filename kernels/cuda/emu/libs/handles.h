// defines: the emulated libraries' handle and descriptor calls in one place (cuBLAS, cuBLASLt,
// cuDNN): make_object, a Create (a new value-initialised object into *out); destroy_object; and
// bind_stream / bound_stream, the stream a handle's work goes to (set and get). Each takes the
// library's own statuses, so a call answers as its library would.
#pragma once
#include <cuda_runtime_api.h>

#include "kernels/cuda/emu/libs/elements.h"

namespace dp::emu::libs {

template <typename Object, typename Status>
Status make_object(Object** out, Status ok, Status bad_pointer, const char* call) {
  if (out == nullptr) return library_refusal(bad_pointer, call, "null result pointer");
  *out = new Object{};
  return ok;
}

template <typename Object, typename Status>
Status destroy_object(Object* h, Status ok, Status no_handle, const char* call) {
  if (h == nullptr) return library_refusal(no_handle, call, "null handle");
  delete h;
  return ok;
}

template <typename Handle, typename Status>
Status bind_stream(Handle* h, cudaStream_t s, Status ok, Status no_handle, Status bad_stream, const char* call) {
  if (h == nullptr) return library_refusal(no_handle, call, "null handle");
  if (!known_stream(s, call)) return bad_stream;
  h->stream = s;
  return ok;
}

template <typename Handle, typename Status>
Status bound_stream(const Handle* h, cudaStream_t* s, Status ok, Status bad, const char* call) {
  if (h == nullptr || s == nullptr) return library_refusal(bad, call, "null handle or result pointer");
  *s = h->stream;
  return ok;
}

}  // namespace dp::emu::libs
