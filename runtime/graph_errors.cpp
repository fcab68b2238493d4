// Graph::forward and Graph::backward: the node loops of graph.cpp, with an allocation that fails
// between two layers (an activation, an input gradient: the graph allocates those, not the layers)
// named by the layer it was for. An error raised inside a layer names it already
// (Layer::forward/backward); one that has context passes through unchanged.
//
// Which node was being allocated is read off the loops' state after the throw, with no bookkeeping
// on the way (a try block costs nothing until something throws):
//   forward:  node i's output is allocated right before its forward, so the first node whose output
//             does not match this batch (shape, dtype, device) is the one; when all match, the failure
//             came after the loop (the f32 copy of a 16-bit output);
//   backward: dacts_[i] is set before node i's backward and cleared after it, and the nodes after i
//             are done, so the highest node with a defined output gradient is the one whose input
//             gradients were being allocated; when none is, the failure came before the loop (the
//             output gradient in the compute dtype).
#include <string>

#include "runtime/device_error.h"
#include "runtime/graph.h"
#include "runtime/last_dispatch.h"

namespace dp {

std::string Graph::failed_forward_allocation(const Tensor& x) const {
  // The activations' dtype (activation_dtype's rule: integer ids become f32 or the compute dtype).
  const DType act = is_floating(x.dtype()) && device_.is_cpu() ? x.dtype() : device_.is_cpu() ? DType::F32 : compute_;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (i < plan_.size() && plan_[i].folded_into >= 0) continue;  // shares its host's output
    Shape out{x.dim(0)};
    out.insert(out.end(), nodes_[i].out_shape.begin(), nodes_[i].out_shape.end());
    const Tensor& a = acts_[i];
    if (!a.fits(out, act, x.device()))
      return dispatch_site(nodes_[i].layer->name(), nodes_[i].layer->type(), "forward");
  }
  return "";
}

std::string Graph::failed_backward_allocation() const {
  for (size_t i = nodes_.size(); i-- > 0;)
    if (dacts_[i].defined()) return dispatch_site(nodes_[i].layer->name(), nodes_[i].layer->type(), "backward");
  return "";
}

const Tensor& Graph::forward(const StepContext& ctx, const Tensor& x) {
  try {
    return forward_nodes(ctx, x);
  } catch (DeviceOutOfMemory& e) {
    if (!e.context().empty()) throw;
    const std::string site = failed_forward_allocation(x);
    if (site.empty()) {
      e.set_allocation("the model's output in f32");
    } else {
      e.add_context(site);
      e.set_allocation("its output");
    }
    throw;
  } catch (HostMemoryError& e) {
    if (!e.context().empty()) throw;
    const std::string site = failed_forward_allocation(x);
    e.add_context(site.empty() ? "the model's output" : "the output of " + site);
    throw;
  }
}

void Graph::backward(const StepContext& ctx, const Tensor& dy, const std::function<void(int node)>& on_ready) {
  try {
    backward_nodes(ctx, dy, on_ready);
  } catch (DeviceOutOfMemory& e) {
    if (!e.context().empty()) throw;
    const std::string site = failed_backward_allocation();
    if (site.empty()) {
      e.set_allocation(fmt::format("the model output's gradient in {}", dtype_name(compute_)));
    } else {
      e.add_context(site);
      e.set_allocation("its input gradient");
    }
    throw;
  } catch (HostMemoryError& e) {
    if (!e.context().empty()) throw;
    const std::string site = failed_backward_allocation();
    e.add_context(site.empty() ? "the model output's gradient" : "an input gradient of " + site);
    throw;
  }
}

}  // namespace dp
