// defines: what every layer's oneDNN path shares (models/layers/<op>/<op>_onednn.cpp): the CPU
// engine and stream, memory descriptors for activations (NCHW or NHWC) and plain tensors,
// memory objects bound to our buffers call by call, Reorder (a cached layout change, optionally
// accumulating), execute, and onednn_call (oneDNN's exceptions as errors naming the layer).
//
// Threads: Debian's libdnnl is the OpenMP build, on the same libgomp pool as our own kernels
// and OpenBLAS, so omp_set_num_threads (train.threads, OMP_NUM_THREADS, the launcher's share of
// the cores) sizes all three at once: one thread pool per process.
// Determinism: oneDNN's CPU primitives split work by the shape and the thread count only and
// reduce in a fixed order, so a rerun with the same thread count gives the same bits (checked by
// tests/models/test_onednn_layers.cpp); a different thread count may change the last bits.
#pragma once
#include <dnnl.hpp>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>

#include "base/error.h"

namespace dp::kernels::cpu::onednn {

using dnnl::memory;
using Tag = memory::format_tag;

dnnl::engine& engine();
// One stream per thread (a layer runs on the thread that calls it); in-order, CPU: execute waits.
dnnl::stream& stream();

// An f32 activation of logical dims (n, c, h, w), stored NCHW or NHWC.
memory::desc act_md(int64_t n, int64_t c, int64_t h, int64_t w, bool nhwc);
// An f32 tensor of `dims` in a plain layout (tag), or in whatever layout a primitive prefers (any).
memory::desc plain_md(const memory::dims& dims, Tag tag);
// A memory object for `md` with no buffer yet: bind one per call with set_data_handle.
memory unbound(const memory::desc& md);
// A memory object that owns a buffer for `md` (weights in a primitive's layout, scratchpads,
// statistics): allocated once, when the primitive for a shape is made.
memory owned(const memory::desc& md);
// Binds `m` to `p` (our tensors' data) and returns it.
inline const memory& bind(memory& m, const void* p) {
  m.set_data_handle(const_cast<void*>(p));
  return m;
}

// This thread's scratch buffers, one per slot: Pad for primitives' scratchpads, the others for
// temporaries a layer needs during one call only (e.g. activations in a blocked layout).
enum class Slot { Pad, A, B, C };

// Binds `m` (made with unbound(), e.g. from pd.scratchpad_desc()) to this thread's buffer of
// `slot`, grown to the largest any call asked for: layers run one after another, so one buffer
// per slot serves them all (they grow during the first step only).
const memory& scratch(memory& m, Slot slot = Slot::Pad);

// The attributes every primitive here is made with: the scratchpad is ours (bound per call by
// scratch()), and with relu a ReLU post-op (an exact fusion of the relu after the layer).
dnnl::primitive_attr scratch_attr(bool relu = false);

// Runs `p` on this thread's stream and waits.
void execute(const dnnl::primitive& p, const std::unordered_map<int, memory>& args);

// A layout change from one descriptor to another, made once; accumulate: dst += reorder(src)
// (oneDNN's sum post-op), which is how parameter gradients are added into the gradient arena.
// Empty (operator bool false) when the two descriptors are the same and nothing need move.
class Reorder {
 public:
  Reorder() = default;
  Reorder(const memory::desc& from, const memory::desc& to, bool accumulate);
  explicit operator bool() const { return made_; }
  void operator()(const memory& from, const memory& to) const;

 private:
  dnnl::reorder prim_;
  bool made_ = false;
};

// Our weight (in `user`, bound to `data`) as a primitive wants it: reordered into `prim` when the
// layouts differ (r made), else `prim` bound to our buffer itself. Returns prim.
const memory& weights_for(const Reorder& r, memory& user, memory& prim, const void* data);

// dst[i] += src[i] for a small f32 vector oneDNN computed (bias, scale and shift gradients),
// added into the gradient arena in index order.
void add_into(float* dst, const memory& src, int64_t n);

// Calls f(), turning a dnnl::error into a DpError that says which layer and operation failed
// and that train.cpu_backend = "reference" avoids oneDNN.
template <typename F>
decltype(auto) onednn_call(const std::string& where, F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (const dnnl::error& e) {
    throw DpError(fmt::format("{}: oneDNN failed: {} (status {}); train.cpu_backend = \"reference\" runs this layer "
                              "on the reference kernels instead",
                              where, e.what(), static_cast<int>(e.status)));
  }
}

}  // namespace dp::kernels::cpu::onednn
