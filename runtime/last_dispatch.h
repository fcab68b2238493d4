// defines: dispatch_site, how errors name a layer's pass ("layer 'conv1' (conv2d), forward"), and
// note_dispatch and last_dispatch, the layer whose GPU work this thread enqueued last.
//
// A kernel that faults (an illegal address, a trap) is reported by CUDA asynchronously: by the
// next call on the host that checks, often a later layer's launch or the loss's read-back. The
// call that reports it is not where it happened; what the host can still say is which layer it
// had dispatched last (the fault is in that layer's work or an earlier one of this step).
// Layer::forward/backward note every GPU dispatch here (a copy of the name: no lifetime ties),
// and CHECK_CUDA's message names it for an asynchronous fault (runtime/cuda/check_runtime.h).
#pragma once
#include <string>

namespace dp {

// "layer 'conv1' (conv2d), forward": what Layer::forward/backward add to an error they pass on.
std::string dispatch_site(const std::string& layer_name, const char* layer_type, const char* pass);

// pass: "forward" or "backward" (a string literal). Thread-local; a name longer than 95
// characters is cut.
void note_dispatch(const std::string& layer_name, const char* layer_type, const char* pass) noexcept;
// "layer 'conv1' (conv2d), forward", or "" when this thread has dispatched none.
std::string last_dispatch();

}  // namespace dp
