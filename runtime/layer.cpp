#include "runtime/layer.h"

#include "runtime/fault_injection.h"
#include "runtime/last_dispatch.h"

namespace dp {

void Layer::bind(std::vector<Tensor> params, std::vector<Tensor> grads, std::vector<Tensor> buffers) {
  DP_CHECK(params.size() == grads.size(), "layer '{}': {} params but {} grads", name_, params.size(), grads.size());
  params_ = std::move(params);
  grads_ = std::move(grads);
  buffers_ = std::move(buffers);
}

namespace {
Tensor planned_view(const std::shared_ptr<Storage>& arena, size_t offset, size_t bytes, const char* what,
                    const Shape& shape, DType dtype, size_t byte_offset) {
  if (!arena) return Tensor();
  const size_t want = byte_offset + bytes_of(shape, dtype);
  DP_CHECK(want <= bytes, "the step plan gave this layer {} bytes {}, and it uses {} (a {} {} at byte {}): its "
           "backward_needs does not declare what its code uses", bytes, what, want, dtype_name(dtype), shape_str(shape),
           byte_offset);
  return Tensor::view_of(arena, offset + byte_offset, shape, dtype);
}
}  // namespace

Tensor LayerMemory::kept(const Shape& shape, DType dtype, size_t byte_offset) const {
  return planned_view(arena, kept_offset, kept_bytes, "to keep", shape, dtype, byte_offset);
}

Tensor LayerMemory::scratch(const Shape& shape, DType dtype, size_t byte_offset) const {
  return planned_view(arena, scratch_offset, scratch_bytes, "of scratch", shape, dtype, byte_offset);
}

BackwardNeeds Layer::backward_needs(const NeedsQuery&) const { return {.input = true, .output = true}; }

void Layer::set_epilogue(Epilogue e) {
  bool can = e == Epilogue::None;
  for (FusionPath path : kFusionPaths) can = can || applicable_epilogues(path).has(e);
  DP_CHECK(can, "layer '{}' ({}) cannot apply a {} epilogue on any path", name_, type(), epilogue_name(e));
  epilogue_ = e;
}

namespace {
// Where a layer's error happened, added to it on the way up: "layer 'conv1' (conv2d), forward".
// Only on the error path: a try block costs nothing until something throws.
[[noreturn]] void rethrow_in_layer(const std::string& name, const char* type, const char* pass) {
  const std::string where = dispatch_site(name, type, pass);
  try {
    throw;
  } catch (DpError& e) {
    e.add_context(where);  // the same object, type and all: an OOM stays an OOM
    throw;
  } catch (const std::exception& e) {  // a library's own (oneDNN's dnnl::error, std::bad_alloc)
    throw DpError(fmt::format("{}: {}", where, e.what()));
  }
}
}  // namespace

void Layer::forward(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) {
  DP_CHECK(static_cast<int>(x.size()) == run_inputs(), "layer '{}' ({}) takes {} inputs, got {}", name_, type(),
           run_inputs(), x.size());
  try {
    if (device_oom_fault_armed()) [[unlikely]] raise_device_oom_fault(y);
    if (y.device().is_cpu()) {
      forward_cpu(ctx, x, y);
    } else {
      note_dispatch(name_, type(), "forward");
      forward_cuda(ctx, x, y);
    }
  } catch (...) {
    rethrow_in_layer(name_, type(), "forward");
  }
}

void Layer::backward(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor& y, const Tensor& dy,
                     std::vector<Tensor>& dx) {
  DP_CHECK(dx.size() == x.size(), "layer '{}': {} inputs but {} input gradients", name_, x.size(), dx.size());
  try {
    if (device_oom_fault_armed()) [[unlikely]] raise_device_oom_fault(y);
    if (y.device().is_cpu()) {
      backward_cpu(ctx, x, y, dy, dx);
    } else {
      note_dispatch(name_, type(), "backward");
      backward_cuda(ctx, x, y, dy, dx);
    }
  } catch (...) {
    rethrow_in_layer(name_, type(), "backward");
  }
}

void Layer::forward_cuda(const StepContext&, const std::vector<Tensor>&, Tensor&) {
  throw DpError(fmt::format("layer '{}' of type {} has no CUDA path in this build [{}]", name_, type(),
                            identity_string()));
}

void Layer::backward_cuda(const StepContext&, const std::vector<Tensor>&, const Tensor&, const Tensor&,
                          std::vector<Tensor>&) {
  throw DpError(fmt::format("layer '{}' of type {} has no CUDA path in this build [{}]", name_, type(),
                            identity_string()));
}

}  // namespace dp
