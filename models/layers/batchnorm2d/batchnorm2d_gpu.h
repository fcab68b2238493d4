// defines: what BatchNorm2d's GPU files share (CUDA builds; batchnorm2d_*_cuda.cpp only):
// BnCudaState (one layer's device state), BnCall (one forward or backward call, checked), and the
// implementations' entry points, one file each:
//   batchnorm2d_cudnn_cuda.cpp     cuDNN's legacy spatial batch norm (train.bn_impl = "cudnn")
//   batchnorm2d_own_cuda.cpp       dptrain's one-pass kernels (train.bn_impl = "own"), also the
//                                  eval backward and every fallback
//   batchnorm2d_cudnn_ex_cuda.cpp  cuDNN's persistent NHWC batch norm (train.bn_impl = "cudnn_ex")
//   batchnorm2d_cuda.cpp           the layer: checks, the choice of path (bn_gpu_path), SyncBN,
//                                  eval, the epilogue's gradient shared by the cuDNN paths
// A new implementation is one file with its forward/backward pair here and one BnImpl value.
#pragma once
#include <compare>
#include <map>
#include <string>

#include "base/pimpl_ptr.h"
#include "models/layers/batchnorm2d/batchnorm2d.h"
#include "models/layers/batchnorm2d/batchnorm2d_ex_guard.h"
#include "models/layers/batchnorm2d/batchnorm2d_kernels.h"
#include "runtime/cuda/buffers.h"
#include "runtime/cuda/cudnn_desc.h"

namespace dp::models {

namespace kc = kernels::cuda;

// bytes of device scratch in t, grown (never shrunk) when a larger shape needs more.
void* grown(Tensor& t, size_t bytes, Device dev);

struct BnExState;  // batchnorm2d_cudnn_ex_cuda.cpp: its activation descriptor

struct BnCudaState {
  struct Key {
    int64_t n;
    DType dtype;
    bool nhwc;
    auto operator<=>(const Key&) const = default;
  };
  struct Descs {
    cuda::TensorDesc x;   // x, y, z, dx, dy, dz (N, C, H, W)
    cuda::TensorDesc bn;  // weight, bias, running and saved statistics (1, C, 1, 1), f32
  };
  // What the last training forward left for its backward.
  struct Last {
    bool valid = false;
    const void* x = nullptr;
    Shape shape;
    uint64_t step = 0;
    BnGpuPath path = BnGpuPath::Cudnn;
    double count = 0;          // values per channel behind the statistics (all ranks' under SyncBN)
    BnExChoice ex;             // CudnnEx: what the forward fused
    size_t reserve_bytes = 0;  // CudnnEx: the reserve space the forward filled
  };

  Device device;
  int64_t C = 0;
  std::map<Key, Descs> descs;
  Tensor saved_mean, saved_invvar;  // (C) f32: cuDNN's saved batch mean and 1/std
  Tensor mean, invstd;              // (C) f64: SyncBN's and eval's statistics (batchnorm2d_kernels.h)
  Tensor sums;                      // (max(2C, C+1)) f64: [sum (C), count] or [sum dy, sum dy xhat]; all-reduced
  Tensor scratch;                   // u8: the f64 sum kernels' partial sums (kc::batchnorm_scratch_bytes)
  Tensor coef;                      // (6C) f32: the own kernels' mean, invstd, scale, k, c1, c2
  Tensor own_scratch;               // u8: the own reductions' partials (kc::batchnorm_reduce_scratch_bytes)
  Tensor dx_scratch;                // u8: a dx the caller does not want, where a library call writes one
  Tensor reserve;                   // u8: cuDNN's persistent batch norm's reserve space, forward to backward
  cuda::PinnedBuffer count_host;    // (1) f64: SyncBN's all-reduced count, read after a stream sync
  PimplPtr<BnExState> ex;           // made by the first CudnnEx call
  bool cudnn_refused = false;       // the legacy call answered NOT_SUPPORTED before
  bool ex_refused = false;          // the persistent call refused before (forward or backward): legacy from then on
  bool ex_logged = false;           // the guard's reason for this layer was logged
  Last last;

  const Descs& descs_for(const kc::BnDims& d, int64_t H, int64_t W, DType dtype);
  float* own_mean() const { return coef.data<float>(); }
  float* own_invstd() const { return coef.data<float>() + C; }
  float* own_scale() const { return coef.data<float>() + 2 * C; }
  float* own_k() const { return coef.data<float>() + 3 * C; }
  float* own_c1() const { return coef.data<float>() + 4 * C; }
  float* own_c2() const { return coef.data<float>() + 5 * C; }
};

// One call of the layer's GPU path, its tensors checked (batchnorm2d_cuda.cpp). Forward: x, r
// (the residual under Epilogue::AddRelu, else null), y. Backward: also dy; dx (null: not wanted),
// dr (the residual's gradient: AddRelu and wanted, else null), dw, db. y is the forward's output
// (after the epilogue) in both.
struct BnCall {
  const StepContext& ctx;
  std::string layer;  // "layer 'bn1' (batchnorm2d)", for messages
  cudaStream_t s;
  DType dt;
  kc::BnDims d;
  int64_t H, W;
  Epilogue epi;
  double momentum, eps;
  const float* w;
  const float* b;
  float* running_mean;
  float* running_var;
  const void* x;
  const void* r;
  void* y;
  const void* dy = nullptr;
  void* dx = nullptr;
  void* dr = nullptr;
  float* dw = nullptr;
  float* db = nullptr;
  bool relu() const { return epi != Epilogue::None; }
  int64_t numel() const { return d.N * d.C * d.HW; }
};

// A cuDNN status other than success and NOT_SUPPORTED (any sub-code; the callers handle it) is fatal.
void check_cudnn_status(cudnnStatus_t s, const char* call, const char* file, int line);

// The legacy spatial batch norm. Training forward: y = bn(x), running statistics and cuDNN's saved
// mean and 1/std updated; then the epilogue (our kernel). Backward: g = the epilogue's gradient,
// then cuDNN's backward on g (saved: the forward's statistics are the state's). false: cuDNN
// answered NOT_SUPPORTED (nothing written; the caller falls back to our kernels).
bool cudnn_forward_train(BnCudaState& st, const BnCall& c);
bool cudnn_backward_train(BnCudaState& st, const BnCall& c);
// Eval forward with the running statistics, then the epilogue. false: NOT_SUPPORTED.
bool cudnn_forward_eval(BnCudaState& st, const BnCall& c);

// Our kernels. Statistics: one pass over x into the state's coefficients (mean, 1/std, w/std),
// the running statistics updated when update_running. Training forward: the statistics with the
// update, then the normalisation with the epilogue. Eval forward: the running statistics'
// coefficients, then the same. Backward (batch_stats: the statistics were this batch's; the
// state's coefficients hold them either way): sums, parameter gradients, dx and dr in two passes.
void own_statistics(BnCudaState& st, const BnCall& c, bool update_running);
void own_forward_train(BnCudaState& st, const BnCall& c);

void own_forward_eval(BnCudaState& st, const BnCall& c);
void own_backward(BnCudaState& st, const BnCall& c, bool batch_stats);
// The eval statistics' coefficients (running mean, 1/sqrt(running var + eps), w/std) in the state.
void own_running_coefficients(BnCudaState& st, const BnCall& c);

// The persistent NHWC batch norm with the guard's choice (ex: bn_ex_choice for this call).
// false: cuDNN answered NOT_SUPPORTED (nothing written; the caller falls back to the legacy path).
bool cudnn_ex_forward_train(BnCudaState& st, const BnCall& c, const BnExChoice& ex);
bool cudnn_ex_backward_train(BnCudaState& st, const BnCall& c);

// The epilogue's gradient for the cuDNN paths and SyncBN: g = dy * (y > 0), written into dr
// when the residual's gradient is wanted, else into `buf` (a transient buffer on the compute
// stream). Returns dy itself without an epilogue.
const void* epilogue_gradient(const BnCall& c, cuda::DeviceBuffer& buf);

}  // namespace dp::models
