// defines: Graph, a DAG of named layers (sequential plus residual joins) with one input and
// one output; forward in topological order, backward in reverse with a per-layer
// "gradients ready" hook (the reducer's entry point).
//
// Nodes are added in topological order (every input must already exist), which is also the
// parameter registration order: the order of the state dict and of the parameter arena.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/arena.h"
#include "runtime/layer.h"

namespace dp {

class Graph {
 public:
  static constexpr int kInput = -1;

  struct Node {
    std::unique_ptr<Layer> layer;
    std::vector<int> inputs;   // node indices, or kInput
    Shape out_shape;           // per sample
    std::vector<int> param_slots;   // indices into the parameter arena
    std::vector<int> buffer_ids;    // indices into buffers()
  };

  struct NamedTensor {
    std::string name;
    Tensor tensor;
  };

  // Adds a layer fed by `inputs` (names of earlier layers or "input"; empty: previous node).
  int add(std::unique_ptr<Layer> layer, const std::vector<std::string>& inputs = {});
  int find(const std::string& layer_name) const;  // -1 if absent

  // Infers shapes from the per-sample input shape, allocates the parameter and gradient arenas
  // and buffers on `device`, and initialises parameters from `seed` (deterministic, on the CPU).
  void build(const Shape& input_shape, uint64_t seed, Device device = Device::cpu());

  // x: [N, input_shape...]; returns the output [N, out...] (owned by the graph until next call).
  const Tensor& forward(const StepContext& ctx, const Tensor& x);
  // dy: gradient w.r.t. the last forward's output. Parameter gradients are accumulated into
  // the gradient arena; on_ready(node index) fires right after a layer with parameters is done.
  void backward(const StepContext& ctx, const Tensor& dy, const std::function<void(int node)>& on_ready = {});
  void zero_grad();

  const std::vector<Node>& nodes() const { return nodes_; }
  const Shape& input_shape() const { return input_shape_; }
  const Shape& output_shape() const { return nodes_.back().out_shape; }
  Arena& params() { return params_; }
  Arena& grads() { return grads_; }
  const Arena& params() const { return params_; }
  const Arena& grads() const { return grads_; }
  const std::vector<NamedTensor>& buffers() const { return buffers_; }
  // Parameters and buffers in registration order, with torchvision-style names.
  std::vector<NamedTensor> state() const;
  int64_t num_parameters() const { return params_.numel(); }
  Device device() const { return device_; }
  bool built() const { return built_; }
  std::string summary() const;  // one line per layer: name, type, output shape, #params

 private:
  std::vector<Node> nodes_;
  std::vector<int> consumers_count_;
  Shape input_shape_;
  Arena params_, grads_;
  std::vector<NamedTensor> buffers_;
  std::vector<Tensor> acts_, dacts_;
  Tensor input_;
  Device device_;
  bool built_ = false;
};

}  // namespace dp
