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

namespace cuda {
class ExecContext;
}

class Graph {
 public:
  static constexpr int kInput = -1;

  struct Node {
    std::unique_ptr<Layer> layer;
    std::vector<int> inputs;   // node indices, or kInput
    Shape out_shape;           // per sample
    std::vector<int> param_slots;   // indices into the parameter arena
    std::vector<int> buffer_ids;    // indices into buffers()
    bool low_precision = false;     // its parameters are bound as 16-bit compute copies
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
  // On a GPU, `gpu` is the process's execution context and `compute` the activations' dtype:
  // with BF16/F16 (mixed precision) the fp32 arenas stay the master copy (optimizer, reducer,
  // checkpoints) and layers with low_precision_params() are bound to 16-bit copies of their
  // weights and to 16-bit gradients, widened into the fp32 arena after their backward.
  void build(const Shape& input_shape, uint64_t seed, Device device = Device::cpu(), DType compute = DType::F32,
             cuda::ExecContext* gpu = nullptr);

  // x: [N, input_shape...]; returns the output [N, out...] (owned by the graph until next call).
  // On the GPU x is in the compute dtype (channels last when 4-D under mixed precision) and the
  // output is always F32 (cast from the compute dtype when that is 16-bit). x may also be i32
  // token ids (a language model's input, for an embedding layer): the activations are then f32 on
  // the CPU and the compute dtype on the GPU, and the input has no gradient.
  const Tensor& forward(const StepContext& ctx, const Tensor& x);
  // dy: gradient w.r.t. the last forward's output (F32). Parameter gradients are accumulated into
  // the gradient arena; on_ready(node index) fires right after a layer with parameters is done
  // (on the GPU: once its backward and the widening of its gradients are enqueued on the compute
  // stream, not when they have run).
  void backward(const StepContext& ctx, const Tensor& dy, const std::function<void(int node)>& on_ready = {});
  // On the GPU: enqueued on the compute stream.
  void zero_grad();
  // Mixed precision: casts the fp32 master parameters into the layers' 16-bit copies (one launch
  // on the compute stream). Call after anything changes the master parameters: the optimizer
  // step, a checkpoint load, the start-up broadcast. No-op in fp32 and on the CPU.
  void refresh_compute_params();
  DType compute_dtype() const { return compute_; }
  // The CPU's kernels (train.cpu_backend; default OneDnn). Under OneDnn a CPU graph plans, at its
  // next forward: 4-D activations stored channels last when every layer takes them (the model
  // input and a 4-D output are transposed at the edges, so callers always see NCHW), and each
  // relu that is the only consumer of a layer that can_fuse_relu() folded into that layer (the
  // relu node then shares its producer's output and passes its gradient through). Reference:
  // NCHW, unfused, the reference kernels. The GPU ignores it.
  void set_cpu_backend(CpuBackend b);
  CpuBackend cpu_backend() const { return cpu_backend_; }
  // oneDNN's convolution algorithm (train.cpu_conv_algorithm; default Auto), carried to the layers.
  void set_cpu_conv_algorithm(CpuConvAlgorithm a) { cpu_conv_algorithm_ = a; }
  // One line for the log: the backend, the layout and which layers run on oneDNN, fused or not.
  std::string cpu_plan_summary();
  cuda::ExecContext* gpu() const { return gpu_; }

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
  // The CPU plan (plan_cpu): backend, layout, and for each node the producer whose output a
  // folded relu shares (-1: none). Input, output and output gradient in the planned layout.
  CpuBackend cpu_backend_ = CpuBackend::OneDnn;
  CpuConvAlgorithm cpu_conv_algorithm_ = CpuConvAlgorithm::Auto;
  bool cpu_planned_ = false, cpu_channels_last_ = false;
  DType cpu_plan_dtype_ = DType::F32;
  std::vector<int> relu_folded_into_;
  Tensor input_nhwc_, output_nchw_, dy_nhwc_;
  void plan_cpu(DType dtype);
  StepContext cpu_context(const StepContext& ctx);
  const Tensor& model_input(const Tensor& x);
  // dst (same logical shape as src) = src in the other layout; allocated once per shape.
  void change_layout(Tensor& dst, const Tensor& src, bool to_nhwc) const;
  Device device_;
  DType compute_ = DType::F32;
  cuda::ExecContext* gpu_ = nullptr;
  Arena lp_params_, lp_grads_;  // mixed precision: 16-bit compute copies (same layout as params_)
  Tensor out32_, dy16_;         // mixed precision: the F32 output and the 16-bit output gradient
  // Input-gradient tensors no longer needed, kept for reuse by shape and dtype: a step after the
  // first allocates nothing (on the GPU, allocations would also synchronise the device).
  std::vector<Tensor> spare_;
  Tensor take_spare(const Shape& shape, DType dtype);
  void give_spare(Tensor t);
  // The GPU side, on the compute stream (graph_cuda.cpp): dst += src; mixed precision's output
  // cast to f32 (out32_) and output-gradient cast to the compute dtype (dy16_); a node's 16-bit
  // gradients widened into the fp32 arena and zeroed; the gradients zeroed.
  void accumulate_device(const Tensor& dst, const Tensor& src) const;
  const Tensor& output_f32();
  const Tensor& output_grad_in_compute(const Tensor& dy);
  void widen_low_precision_grads(const Node& node);
  void zero_grad_device();
  bool built_ = false;
};

}  // namespace dp
