// What a build without CUDA has instead of runtime's CUDA halves (the *_cuda.cpp files, which
// only a CUDA build compiles; the top CMakeLists.txt compiles this file only without CUDA): no
// device memory, and GPU paths that say the build has none. Nothing here is reached in such a
// build, where no device tensor can be allocated, but for cuda_device_count() and the no-ops.
#include "base/error.h"
#include "runtime/checkpoint/checkpoint_snapshot.h"
#include "runtime/device_memory.h"
#include "runtime/graph.h"
#include "runtime/optim/adamw.h"
#include "runtime/optim/grad_clip.h"
#include "runtime/optim/sgd.h"

namespace dp {

namespace {
[[noreturn]] void no_cuda(const char* what) {
  throw DpError(fmt::format("{} requested in a build without CUDA [{}]", what, identity_string()));
}
}  // namespace

// device_memory.h
void* device_alloc(size_t, Device device) {
  throw DpError(fmt::format("cannot allocate on {} [{}]: this dptrain was built without CUDA", device.str(),
                            identity_string()));
}
void device_free(void*, Device) noexcept {}
void device_copy(void*, Device, const void*, Device, size_t) {
  throw DpError("device copy requested in a build without CUDA");
}
void device_memset_zero(void*, Device, size_t) { throw DpError("device memset requested in a build without CUDA"); }
void device_stream_synchronize(void*) { throw DpError("a CUDA stream synchronise requested in a build without CUDA"); }
MemoryInfo device_memory_info(Device device) noexcept { return device.is_cpu() ? host_memory_info() : MemoryInfo{}; }
int cuda_device_count() { return 0; }
bool built_with_cuda() { return false; }

// graph.h: a graph on the CPU computes in f32, so there are no 16-bit copies to refresh.
void Graph::refresh_compute_params() {}
bool Graph::gpu_convolutions_fuse_relu() const { return false; }
const char* Graph::gpu_convolution_api() const { return "none"; }
void Graph::accumulate_device(const Tensor&, const Tensor&) const { no_cuda("GPU gradient accumulation"); }
const Tensor& Graph::output_f32() { no_cuda("a GPU output cast"); }
const Tensor& Graph::output_grad_in_compute(const Tensor&) { no_cuda("a GPU output-gradient cast"); }
void Graph::widen_low_precision_grads(const Node&) { no_cuda("GPU gradient widening"); }
void Graph::zero_grad_device() { no_cuda("zeroing GPU gradients"); }
void Graph::poison_device_bytes(size_t, size_t) { no_cuda("poisoning a GPU step arena"); }

namespace optim {
void AdamW::step_device(float*, const float*, int64_t, int64_t, const kernels::AdamWScalars&, Copy16,
                        const kernels::DecaySkips&) {
  no_cuda("an adamw GPU step");
}
void Sgd::step_device(float*, const float*, float*, int64_t, const kernels::SgdScalars&, Copy16,
                      const kernels::DecaySkips&) {
  no_cuda("an sgd GPU step");
}
double GradClipper::clip_device(const Tensor&, void*) { no_cuda("GPU gradient clipping"); }
double GradClipper::clip_pieces_device(const Tensor&, const std::vector<ArenaPiece>&, const Reduce&, void*) {
  no_cuda("GPU gradient clipping");
}
}  // namespace optim

}  // namespace dp

// checkpoint/checkpoint_snapshot.h: no device tensors to copy in such a build.
namespace dp::detail {
std::shared_ptr<void> pin_host_memory(void*, size_t) {
  throw DpError("pinned host memory requested in a build without CUDA");
}
void copy_to_host_on_stream(const std::vector<std::pair<Tensor, Tensor>>&, void*) {
  throw DpError("a device-to-host snapshot copy requested in a build without CUDA");
}
}  // namespace dp::detail
