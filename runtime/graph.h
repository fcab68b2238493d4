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
#include "runtime/fusion_plan.h"
#include "runtime/grad_plan.h"
#include "runtime/layer.h"

namespace dp {

namespace cuda {
class ExecContext;
}
class GraphObserver;   // runtime/graph_observer.h
struct StepMemoryPlan;  // runtime/step_memory.h

class Graph {
 public:
  static constexpr int kInput = -1;

  struct Node {
    std::unique_ptr<Layer> layer;
    std::vector<int> inputs;   // node indices, or kInput
    Shape out_shape;           // per sample
    std::vector<int> param_slots;   // indices into the parameter arena: the layer's own parameters
    // Every trainable parameter bound to the layer, in declare_params order: its own slots and the
    // slots of other layers' parameters it ties to (ParamDecl::tied_to). Only param_slots are
    // reported ready: a tied slot is reported by its owner, whose backward runs later.
    std::vector<int> bound_slots;
    std::vector<std::string> tied_names;  // the layer's names of its tied parameters ("lm_head.weight")
    std::vector<int> tied_slots;          // and the slots they share, in the same order
    std::vector<int> buffer_ids;    // indices into buffers()
    bool low_precision = false;     // its parameters are bound as 16-bit compute copies
  };

  struct NamedTensor {
    std::string name;
    Tensor tensor;
    // Non-empty for a tied parameter's second name ("lm_head.weight" of "transformer.wte.weight"):
    // the same tensor as that entry. Files written from state() hold both names (equal values),
    // so a PyTorch model with the same tying loads them strictly.
    std::string alias_of;
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
  // grad_memory Paged (CPU only): the gradient arena on a page mapping of its own, whose pages
  // ZeRO stage 2 gives back after each bucket's reduce-scatter (collectives/reducer/zero_shard.h;
  // zero_grad() would fault them all in again: ZeroShard::zero_grads zeroes what the rank keeps).
  void build(const Shape& input_shape, uint64_t seed, Device device = Device::cpu(), DType compute = DType::F32,
             cuda::ExecContext* gpu = nullptr, ArenaMemory grad_memory = ArenaMemory::Allocated);

  // x: [N, input_shape...]; returns the output [N, out...] (owned by the graph until next call; on
  // the CPU read it before backward, which gives its bytes in the step arena to other tensors).
  // On the GPU x is in the compute dtype (channels last when 4-D under mixed precision) and the
  // output is always F32 (cast from the compute dtype when that is 16-bit). x may also be integer
  // ids (token ids, I32) when every layer that takes the model input takes_integer_input(): the
  // activations are then F32 on the CPU and the compute dtype on the GPU (a float x: its dtype
  // on the CPU, f32 or f64).
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
  // Mixed precision on a GPU: the 16-bit compute copy of the parameters (flat, compute dtype, the
  // parameter arena's layout), which the fused optimizer can write in its own pass
  // (Optimizer::write_compute_copy) instead of refresh_compute_params' cast. Undefined otherwise.
  Tensor compute_params() const { return lp_params_.allocated() ? lp_params_.flat() : Tensor(); }
  // The CPU's kernels (train.cpu_backend; default OneDnn). Under OneDnn a CPU graph plans, at its
  // next forward: 4-D activations stored channels last when every layer takes them (the model
  // input and a 4-D output are transposed at the edges, so callers always see NCHW), and the
  // relus runtime/fusion_plan.h folds into the layers before them on FusionPath::CpuOnednn (the
  // relu node then shares its producer's output and passes its gradient through). Reference:
  // NCHW, unfused, the reference kernels. The GPU ignores it.
  void set_cpu_backend(CpuBackend b);
  CpuBackend cpu_backend() const { return cpu_backend_; }
  // oneDNN's convolution algorithm (train.cpu_conv_algorithm; default Auto), carried to the layers.
  void set_cpu_conv_algorithm(CpuConvAlgorithm a) { cpu_conv_algorithm_ = a; }
  // The linear layers' GEMM library (train.cpu_gemm; default Auto), carried to the layers.
  void set_cpu_gemm(CpuGemm g) { cpu_gemm_ = g; }
  // train.precision = "bf16" on the CPU (torch.autocast("cpu", bfloat16)): the layers' oneDNN
  // matmuls take bf16 operands and give f32; everything else, parameters included, stays f32.
  void set_cpu_matmul_bf16(bool on) { cpu_matmul_bf16_ = on; }
  // One line for the log: the backend, the layout and which layers run on oneDNN, fused or not.
  std::string cpu_plan_summary();
  cuda::ExecContext* gpu() const { return gpu_; }
  // Told about every node forward and backward run (nullptr: nobody); the profile.layers window.
  void set_observer(GraphObserver* o) { observer_ = o; }
  // The GPU plan (train.gpu_fusion; default off until a GPU run has checked it), made at a GPU
  // graph's next forward by runtime/fusion_plan.h on FusionPath::Gpu, or GpuCudnnGraph under
  // train.cudnn_api = "graph" (convolutions then take a ReLU too): each relu, add and tanh gelu it
  // folds into the layer before it (`bn -> relu`, `bn -> add -> relu`, `conv -> relu`,
  // `c_fc -> gelu`) is not run; its producer's layer applies it (Layer::set_epilogue), the folded
  // nodes share the host's output, and their gradients are the host's: the host's backward gives
  // the residual's gradient too. A host with a residual runs at the add's position. Off: every
  // node runs. The CPU ignores it.
  void set_gpu_fusion(bool on);
  bool gpu_fusion() const { return gpu_fusion_; }
  // One line for the log: the convolutions' cuDNN API and what the GPU plan folded
  // ("bn1+relu1 layer1.0.bn3+add+relu3 conv1+relu ...").
  std::string gpu_plan_summary();
  // What runtime/fusion_plan.h plans over on `path`: each node's epilogues on that path, what it
  // is as a follower, and its inputs.
  std::vector<FusionNode> fusion_wiring(FusionPath path) const;
  // Tests: run with `plan` (e.g. plan_fusion(fusion_wiring(FusionPath::Gpu))) instead of the
  // device's own plan, on either device, its epilogues handed to the layers; a CPU graph then
  // keeps NCHW f32 activations and folds nothing else. Until set_cpu_backend or set_gpu_fusion
  // re-plans.
  void use_plan_for_testing(std::vector<NodePlan> plan);
  // The node whose layer applies `node` (a relu, or an add, folded into it by the CPU or the GPU
  // plan), or -1 (not folded, or not planned yet).
  int folded_into(int node) const {
    return planned() ? plan_[static_cast<size_t>(node)].folded_into : -1;
  }
  // Tests (issue 30's proof that no layer reads bytes the plan gave to another tensor): on the CPU,
  // fill the step arena with NaN (every byte 0xFF) at the start of every forward, and each tensor
  // of the arena right after the last step event the plan lets read it (its bytes are another's).
  void poison_step_arena_for_testing(bool on) { poison_step_arena_ = on; }
  // A GPU graph places its outputs and input gradients in a step arena by the plan's lifetimes
  // too (train.gpu_step_arena, set by models::apply_gpu_choices; off by default until a GPU run has
  // checked it): the arena holds only the graph's own tensors, as the GPU's layers keep their state
  // in their own allocations. Switching drops the other scheme's tensors; the next forward places
  // them again.
  void use_gpu_step_arena(bool on);
  bool gpu_step_arena() const { return gpu_step_arena_; }
  // Tests: a CPU graph places only its outputs and input gradients, as a GPU's arena does (its
  // layers keep their state and scratch themselves, the caller the loss's gradient), so that the
  // GPU arena's plan and placement run, poisoned, on the CPU. Set before the first forward.
  void place_graph_tensors_only_for_testing(bool on) { graph_tensors_only_ = on, placed_batch_ = 0, arena_batch_ = 0; }
  // On the CPU, the place of the loss's f32 gradient w.r.t. the last forward's output in the step
  // arena (the plan's "loss.dlogits_f32"): a caller writes the loss gradient there and passes it
  // to backward, so it costs no bytes of its own. Undefined on a GPU or before a forward.
  Tensor loss_gradient() const;
  // The step arena (graph_step_arena.cpp): its bytes (0 before the first forward, or on a GPU
  // without gpu_step_arena).
  size_t step_arena_bytes() const { return step_arena_.defined() ? step_arena_.nbytes() : 0; }

  const std::vector<Node>& nodes() const { return nodes_; }
  const Shape& input_shape() const { return input_shape_; }
  const Shape& output_shape() const { return nodes_.back().out_shape; }
  Arena& params() { return params_; }
  Arena& grads() { return grads_; }
  const Arena& params() const { return params_; }
  const Arena& grads() const { return grads_; }
  const std::vector<NamedTensor>& buffers() const { return buffers_; }
  // Parameters and buffers in registration order, with torchvision-style names; a tied parameter
  // appears under its owner's name and again, with alias_of set, under the tying layer's name.
  std::vector<NamedTensor> state() const;
  int64_t num_parameters() const { return params_.numel(); }
  Device device() const { return device_; }
  bool built() const { return built_; }
  std::string summary() const;  // one line per layer: name, type, output shape, #params

 private:
  std::vector<Node> nodes_;
  Shape input_shape_;
  Arena params_, grads_;
  std::vector<NamedTensor> buffers_;
  std::vector<Tensor> acts_, dacts_;
  Tensor input_;
  // The plan of the device's kind (plan_cpu or plan_gpu): per node, what folds into what and
  // where each layer runs (runtime/fusion_plan.h's NodePlan; the CPU folds relus only, in place).
  std::vector<NodePlan> plan_;
  // plan_ = plan, each layer given its epilogue, the folded nodes' shared outputs let go
  // (graph_fusion.cpp).
  void adopt_plan(std::vector<NodePlan> plan);
  bool planned() const { return device_.is_cpu() ? cpu_planned_ : gpu_planned_; }
  // The CPU plan (plan_cpu): backend, layout, folded relus. Input, output and output gradient in
  // the planned layout.
  CpuBackend cpu_backend_ = CpuBackend::OneDnn;
  CpuConvAlgorithm cpu_conv_algorithm_ = CpuConvAlgorithm::Auto;
  CpuGemm cpu_gemm_ = CpuGemm::Auto;
  bool cpu_matmul_bf16_ = false;
  bool cpu_planned_ = false, cpu_channels_last_ = false;
  DType cpu_plan_dtype_ = DType::F32;
  Tensor input_nhwc_, output_nchw_, dy_nhwc_;
  void plan_cpu(DType dtype);
  // The GPU plan (plan_gpu, graph_gpu_plan.cpp).
  bool gpu_planned_ = false, gpu_fusion_ = false;
  void plan_gpu();
  // Whether convolutions take a folded ReLU on this GPU (cuDNN's graph API; graph_cuda.cpp).
  bool gpu_convolutions_fuse_relu() const;
  const char* gpu_convolution_api() const;  // for the plan's log line
  // The nodes whose outputs node's layer takes: its inputs, then the residual of an AddRelu host.
  std::vector<int> run_sources(int node) const;
  // One node's layer forward / backward at its position (the graph's loops' bodies).
  void forward_node(const StepContext& ctx, int node, int64_t batch, DType act, Device dev);  // act: activations' dtype
  // run: the index of this Run among the schedule's runs (its row of grad_plan_).
  void backward_node(const StepContext& ctx, int node, size_t run, std::vector<bool>& have,
                     const std::function<void(int node)>& on_ready);
  // The activations' dtype for model input x; throws UserError when x holds integer ids and a layer
  // that takes the model input cannot take them.
  DType activation_dtype(const Tensor& x) const;
  StepContext cpu_context(const StepContext& ctx);
  const Tensor& model_input(const Tensor& x);
  // dst (same logical shape as src) = src in the other layout; allocated once per shape.
  void change_layout(Tensor& dst, const Tensor& src, bool to_nhwc) const;
  Device device_;
  DType compute_ = DType::F32;
  cuda::ExecContext* gpu_ = nullptr;
  GraphObserver* observer_ = nullptr;
  Arena lp_params_, lp_grads_;  // mixed precision: 16-bit compute copies (same layout as params_)
  Tensor out32_, dy16_;         // mixed precision: the F32 output and the 16-bit output gradient
  // The input gradients (runtime/grad_plan.h): the backward schedule of plan_ (remade when plan_
  // changes), the plan of its gradient buffers for the current shapes (remade when a gradient's
  // size changes: a new batch size), and the arena they live in, grown only, so a smaller last
  // batch or an evaluation reuses it: a step after the first allocates nothing (on the GPU an
  // allocation would also synchronise the device).
  std::vector<BackwardStep> schedule_;
  GradientPlan grad_plan_;
  std::vector<size_t> grad_plan_bytes_;  // per node: the gradient bytes grad_plan_ was made for
  Tensor grad_arena_;                    // U8 [arena bytes], on device_ (a GPU's; the CPU's are in step_arena_)
  // The CPU's step arena (issue 30; graph_step_arena.cpp): every output (acts_) and input gradient
  // of a step at the offsets of plan_step_memory's plan for the batch and path run (graph_arena:
  // tensors whose lifetimes do not overlap share bytes), with what the layers keep and their scratch,
  // in one storage made for the largest batch so far and reused by a smaller one (a last partial
  // batch, an evaluation).
  Tensor step_arena_;                  // U8 [bytes], on device_ (a GPU's under gpu_step_arena_)
  bool gpu_step_arena_ = false;
  bool graph_tensors_only_ = false;    // a CPU graph's arena as a GPU's (tests)
  int64_t arena_batch_ = 0;            // the largest batch step_arena_ holds a plan of (0: after a new plan)
  int64_t placed_batch_ = 0;           // the batch acts_ are placed for (0: not placed; adopt_plan resets)
  DType placed_dtype_ = DType::F32;
  GraphArena step_places_;             // the offsets acts_ and the input gradients are at
  bool poison_step_arena_ = false;
  std::vector<std::vector<std::pair<size_t, size_t>>> dead_after_;  // per step event: [offset, end) last read there
  void place_step_arena(int64_t batch, DType act);
  void allocate_step_arena(size_t need, int64_t batch);  // grown for a larger batch only
  void note_deaths(const StepMemoryPlan& plan, const GraphArena& places);  // fills dead_after_
  // Node `node`'s kept bytes and its forward's or backward's scratch in the step arena ({} on a GPU).
  LayerMemory layer_memory(int node, bool backward) const;
  // The input's channels-last copy's place in the arena (undefined when the plan has none of that size).
  Tensor input_copy_place(const Shape& shape, DType dtype) const;
  void poison_dead_tensors(int event);  // under poison_step_arena_: NaN into what dies at `event`
  // [offset, offset + bytes) of the GPU's step arena filled with 0xFF on the compute stream
  // (graph_cuda.cpp): poison_dead_tensors on a GPU.
  void poison_device_bytes(size_t offset, size_t bytes);
  // Whether this step's outputs and input gradients live in step_arena_ (the CPU's, or the GPU's
  // under gpu_step_arena_); else a GPU graph's outputs are its own and its gradients in grad_arena_.
  bool arena_placed() const { return device_.is_cpu() || gpu_step_arena_; }
  void plan_input_gradients_for_step();
  // Buffer b of grad_plan_ as a tensor of `shape` and `dtype`.
  Tensor grad_buffer(int b, const Shape& shape, DType dtype) const;
  // The arena slot of the parameter `d` (declared as `full`) ties to; UserError when there is none
  // of that name and shape.
  int tied_slot(const std::string& full, const ParamDecl& d) const;
  // build()'s steps, in order.
  std::vector<std::vector<ParamDecl>> declare_layers();
  void init_params(const std::vector<std::vector<ParamDecl>>& decls, uint64_t seed);
  void place_on_device();
  void make_grad_arenas(ArenaMemory grad_memory);
  void bind_layers();
  // The GPU side, on the compute stream (graph_cuda.cpp): dst += src; mixed precision's output
  // cast to f32 (out32_) and output-gradient cast to the compute dtype (dy16_); a node's 16-bit
  // gradients widened into the fp32 arena and zeroed; the gradients zeroed.
  void accumulate_device(const Tensor& dst, const Tensor& src) const;
  const Tensor& output_f32();
  const Tensor& output_grad_in_compute(const Tensor& dy);
  void widen_low_precision_grads(const Node& node);
  void zero_grad_device();
  bool built_ = false;
  // forward's and backward's node loops (graph.cpp). forward and backward (graph_errors.cpp) run
  // them and name the layer whose output or input gradient could not be allocated.
  const Tensor& forward_nodes(const StepContext& ctx, const Tensor& x);
  void backward_nodes(const StepContext& ctx, const Tensor& dy, const std::function<void(int node)>& on_ready);
  std::string failed_forward_allocation(const Tensor& x) const;
  std::string failed_backward_allocation() const;
};

}  // namespace dp
