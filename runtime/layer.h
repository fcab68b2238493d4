// defines: Layer (the base of every layer), ParamDecl, StepContext, and DP_LAYER_CPU_PATH /
// DP_LAYER_CUDA_PATH (how a layer declares its CPU and GPU paths).
//
// Caffe-style: the public forward/backward are non-virtual and dispatch on the tensors' device
// to forward_cpu / forward_cuda. Shapes given to a layer at build time are per-sample (no batch
// dimension); tensors at run time have the batch as dimension 0.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "base/rng.h"
#include "runtime/backward_needs.h"
#include "runtime/cpu_backend.h"
#include "runtime/epilogue.h"
#include "runtime/tensor.h"

namespace dp {

class Communicator;
namespace cuda {
class ExecContext;
}

// The bytes a CPU graph's step plan gives one node's layer (runtime/step_memory.h): what its
// backward_needs declares it keeps from forward to backward (the same bytes in both calls, and
// nobody else's in between) and its scratch for the call at hand. Null where nothing is planned
// (a GPU graph, a layer run alone): the layer then uses its own buffers.
struct LayerMemory {
  std::shared_ptr<Storage> arena;  // null: nothing planned
  size_t kept_offset = 0, kept_bytes = 0, scratch_offset = 0, scratch_bytes = 0;
  // A view of `shape` in `dtype` at the start of the kept (scratch) bytes, or `byte_offset` into
  // them; undefined when nothing is planned. A DpError when the plan gave fewer bytes than that:
  // the layer's backward_needs does not declare what its code uses.
  Tensor kept(const Shape& shape, DType dtype, size_t byte_offset = 0) const;
  Tensor scratch(const Shape& shape, DType dtype, size_t byte_offset = 0) const;
};

struct StepContext {
  bool training = true;
  uint64_t seed = 0;   // run seed
  uint64_t step = 0;   // global step (dropout masks are a function of seed, step, layer)
  // The ranks' communicator, for layers that reduce across ranks (SyncBN); null = this process
  // alone. Such layers issue their collectives in graph order, the same on every rank.
  Communicator* comm = nullptr;
  // The GPU side (null on the CPU): streams, library handles and workspace. Layers launch on
  // gpu->compute() only.
  cuda::ExecContext* gpu = nullptr;
  // Activations' dtype on the GPU: F32, or BF16/F16 under mixed precision (train.precision).
  // Parameters of layers with low_precision_params() come in this dtype too; the others (batch
  // norm) keep F32 parameters and buffers. The CPU always computes in the tensors' own dtype.
  DType compute = DType::F32;
  // 4-D activations are stored NHWC (channels last) while their shapes stay [N, C, H, W]: set on
  // the GPU with BF16/F16 so cuDNN picks tensor-core kernels. Layout-free layers ignore it.
  bool channels_last = false;
  // The CPU's kernels (train.cpu_backend; the graph sets it from its own choice). Layers with a
  // oneDNN path take it for f32 tensors under OneDnn; on the CPU, channels_last is only ever set
  // together with OneDnn (Graph::forward), and every layer that accepts it then handles NHWC.
  CpuBackend cpu_backend = CpuBackend::Reference;
  // oneDNN's convolution algorithm (train.cpu_conv_algorithm), under OneDnn.
  CpuConvAlgorithm cpu_conv_algorithm = CpuConvAlgorithm::Auto;
  // The linear layers' GEMM library (train.cpu_gemm), under OneDnn.
  CpuGemm cpu_gemm = CpuGemm::Auto;
  // train.precision = "bf16" on the CPU, under OneDnn: the linear products (Linear's, the
  // attention's projections) cast their f32 operands to bf16 and accumulate and write f32.
  bool cpu_matmul_bf16 = false;
  // This node's planned bytes (set by the graph per node, CPU only).
  LayerMemory mem;
};

// True when t (an activation of this step) is stored channels last: 4-D under channels_last.
inline bool is_channels_last(const StepContext& ctx, const Tensor& t) { return ctx.channels_last && t.ndim() == 4; }

// Fills a parameter at initialisation (CPU f32 tensor).
using InitFn = std::function<void(Tensor& t, Rng& rng)>;

struct ParamDecl {
  std::string name;        // suffix: "weight", "bias", "running_mean", ...
  Shape shape;
  bool trainable = true;   // false: a buffer (running statistics), not in the parameter arena
  DType dtype = DType::F32;
  InitFn init;             // null: zeros
  // Non-empty: this parameter is another layer's, named in full ("transformer.wte.weight"; an
  // earlier layer's trainable parameter of the same shape). The graph binds that parameter and
  // its gradient here instead of a slot of its own (weight tying, e.g. GPT's LM head on the token
  // embedding): one arena slot, the optimizer and the reducer see it once, and the gradients of
  // both uses add up in it (every layer accumulates its parameter gradients). The owner's layer
  // reports the slot ready; a tying layer must run after it in forward (before it in backward).
  std::string tied_to;
};

class Layer {
 public:
  explicit Layer(std::string name) : name_(std::move(name)) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return name_; }
  virtual const char* type() const = 0;
  virtual int num_inputs() const { return 1; }
  // True for a layer whose input is integer ids (an embedding): it may take the model input when
  // that is an integer tensor (token ids, I32). The graph refuses an integer model input to any
  // other layer, naming it.
  virtual bool takes_integer_input() const { return false; }

  // Validates the per-sample input shapes and returns the per-sample output shape. Called once
  // when the graph is built, before declare_params. Throws UserError naming the layer.
  virtual Shape setup(const std::vector<Shape>& in) = 0;
  // Parameters and buffers, in registration order (the order of the state dict).
  virtual std::vector<ParamDecl> declare_params() const { return {}; }
  // True when the layer computes with its trainable parameters in the step's compute dtype
  // (convolution, linear): under mixed precision the graph binds 16-bit copies of the fp32
  // master weights and 16-bit gradients, and widens those gradients into the fp32 arena after
  // the layer's backward. False (the default): parameters and gradients stay F32.
  virtual bool low_precision_params() const { return false; }

  // The CPU graph's plan under CpuBackend::OneDnn (Graph::forward). cpu_channels_last: the layer
  // takes and gives 4-D activations stored NHWC on the CPU (under ctx.channels_last); the graph
  // keeps activations channels last only when every layer does. has_onednn_path: f32 runs on
  // oneDNN (logged once per graph).
  virtual bool cpu_channels_last() const { return false; }
  virtual bool has_onednn_path() const { return false; }

  // Fusion (runtime/fusion_plan.h; the vocabulary in runtime/epilogue.h). A graph's plan, on the
  // CPU under oneDNN or on the GPU under train.gpu_fusion, folds the plain ops after a layer into
  // it: a following relu (Epilogue::Relu), a following add and its relu (AddRelu: the add's other
  // input comes as an extra last input x.back(), and its gradient goes to dx.back()), a following
  // tanh gelu (Gelu). applicable_epilogues: what this layer's kernels on `path` apply to its own
  // output and take off its output gradient in backward (none by default). as_follower: what the
  // plan may fold this layer as into the layer before it (Other by default: never).
  virtual EpilogueSet applicable_epilogues(FusionPath) const { return {}; }
  virtual Follower as_follower() const { return Follower::Other; }
  // What this layer's backward reads of its forward on `q.path` for `q`'s shapes and dtype (its
  // inputs, its output, kept extras: a mask, statistics, a workspace) and the scratch its forward
  // or backward needs while it runs, with the epilogue q.epilogue (runtime/backward_needs.h). It must
  // be true of the code: a backward must not read what its layer does not declare (the layers'
  // poison tests check it on the CPU). The default is the conservative "keeps its inputs and its
  // output, nothing else"; a layer whose backward reads less, or keeps more, says so.
  virtual BackwardNeeds backward_needs(const NeedsQuery& q) const;
  // The plan's epilogue for this layer (None when it re-plans), which its paths apply; a DpError
  // unless one of its paths can apply it.
  void set_epilogue(Epilogue e);
  Epilogue epilogue() const { return epilogue_; }
  // The inputs forward and backward take: num_inputs(), plus the residual under AddRelu.
  int run_inputs() const { return num_inputs() + (epilogue_ == Epilogue::AddRelu ? 1 : 0); }

  // Called by the graph after allocation: views in declare_params order, split into trainable
  // (params/grads, views into the arenas) and buffers.
  void bind(std::vector<Tensor> params, std::vector<Tensor> grads, std::vector<Tensor> buffers);
  const std::vector<Tensor>& params() const { return params_; }
  const std::vector<Tensor>& grads() const { return grads_; }
  const std::vector<Tensor>& buffers() const { return buffers_; }

  // y is preallocated with the batch's output shape; x.size() == run_inputs().
  void forward(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y);
  // dy: gradient of the loss w.r.t. y. dx[i] is defined where the input needs a gradient, is
  // preallocated and is overwritten. Parameter gradients are accumulated (+=) into grads().
  void backward(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor& y, const Tensor& dy,
                std::vector<Tensor>& dx);

 protected:
  virtual void forward_cpu(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) = 0;
  virtual void backward_cpu(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor& y,
                            const Tensor& dy, std::vector<Tensor>& dx) = 0;
  // A layer with a GPU path overrides these with DP_LAYER_CUDA_PATH(); Layer's own say that
  // there is no CUDA path (in this build, or for this layer).
  virtual void forward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y);
  virtual void backward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor& y,
                             const Tensor& dy, std::vector<Tensor>& dx);

  std::string name_;
  std::vector<Tensor> params_, grads_, buffers_;

 private:
  Epilogue epilogue_ = Epilogue::None;  // set by set_epilogue
};

}  // namespace dp

// In a layer's protected section: DP_LAYER_CPU_PATH(); declares its forward_cpu and backward_cpu
// overrides (defined in its <op>.cpp), DP_LAYER_CUDA_PATH(); its forward_cuda and
// backward_cuda overrides, defined in its <op>_cuda.cpp. That file is compiled only in a CUDA
// build (the top CMakeLists.txt), so in a build without CUDA the macro declares nothing and the
// layer keeps Layer's, which say that this build has no CUDA path.
#define DP_LAYER_CPU_PATH()                                                                                    \
  void forward_cpu(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) override;                  \
  void backward_cpu(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor& y, const Tensor& dy,   \
                    std::vector<Tensor>& dx) override
#ifdef DPTRAIN_HAVE_CUDA
#define DP_LAYER_CUDA_PATH()                                                                                   \
  void forward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) override;                 \
  void backward_cuda(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor& y, const Tensor& dy,  \
                     std::vector<Tensor>& dx) override
#else
#define DP_LAYER_CUDA_PATH() static_assert(true)
#endif
