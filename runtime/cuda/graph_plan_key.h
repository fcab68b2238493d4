// defines: the key of a cuDNN graph-API plan — PlanKey (the op, its tensors with dims, strides,
// dtype and pointer alignment, the convolution geometry or attention options, the fused epilogue,
// the math mode, the device) with its hash and printable form; PlanChoiceKey (the tiers of
// alternative descriptions one choice is made over); validate_plan_key (pure shape checks per op);
// deselected_notes (which engines a math mode rules out); byte_alignment.
//
// Library-free: compiled and unit-tested in every build. runtime/cuda/cudnn_graph.h builds a
// cuDNN frontend graph from a PlanKey alone, so everything a plan depends on is in the key:
// two calls with equal keys may share one plan, and any field that differs gives another.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/dtype.h"

namespace dp::cuda {

// The op a plan computes, and the order of its tensors in PlanKey::tensors (and in the pointers
// a plan executes on):
//   ConvFprop  x [N,C,H,W], w [K,C/g,R,S], bias [1,K,1,1] (only with kFuseBias), y [N,K,P,Q]
//   ConvDgrad  dy [N,K,P,Q], w [K,C/g,R,S], dx [N,C,H,W]                   (dx overwritten)
//   ConvWgrad  x [N,C,H,W], dy [N,K,P,Q], dw [K,C/g,R,S]                   (dw overwritten)
//   SdpaFprop  q [B,H,S,D], k [B,Hk,Skv,D], v [B,Hk,Skv,Dv], o [B,H,S,Dv], stats [B,H,S,1] f32
//              (stats only when training: the log-sum-exp the backward needs)
//   SdpaBprop  q, k, v, o, do (like o), stats, dq (like q), dk (like k), dv (like v)
// Groups are implied by the shapes (C / (C/g)), as cuDNN's graph API infers them.
enum class GraphOp : uint8_t { ConvFprop, ConvDgrad, ConvWgrad, SdpaFprop, SdpaBprop };
const char* graph_op_name(GraphOp op);  // "conv_fprop", "conv_dgrad", "conv_wgrad", "sdpa_fprop", "sdpa_bprop"

// How a plan may round; part of every key, so an FMA-only choice is never reused for TF32 or back.
enum class MathMode : uint8_t {
  Fma,       // f32 data at full f32 precision (no TF32): PyTorch's allow_tf32 = False
  Tf32,      // f32 data on tensor cores in TF32 (for a future train.tf32)
  Tensor16,  // bf16/f16 data on tensor cores, f32 accumulation
};
const char* math_mode_name(MathMode m);  // "fma", "tf32", "tensor16"

// cuDNN's numerical notes (CUDNN_NUMERICAL_NOTE_*) that rule an engine out.
enum class NumericNote : uint8_t { TensorCore, DownConvertInputs, ReducedPrecisionReduction };
// The notes an engine may not carry under `m`: Fma rules out tensor cores and down-converted
// inputs (TF32), every mode rules out reduced-precision (16-bit) accumulation.
std::vector<NumericNote> deselected_notes(MathMode m);

// A forward convolution's epilogue, as bits: y = relu(conv(x, w) + bias), all in f32 before the
// one rounding to the output dtype.
enum ConvFusion : uint8_t { kFuseNone = 0, kFuseBias = 1, kFuseRelu = 2 };

// The largest alignment a key records: cuDNN's default assumption for every tensor pointer.
constexpr int64_t kMaxTensorAlign = 16;
// The largest power of two, at most kMaxTensorAlign, dividing the address (16 for null):
// base/alignment.h with cuDNN's cap.
int64_t byte_alignment(const void* p);

struct GraphTensor {
  std::array<int64_t, 4> dims{};     // logical order: NCHW, KCRS, BHSD
  std::array<int64_t, 4> strides{};  // elements between neighbours along each logical dim
  DType dtype = DType::F32;
  int64_t align = kMaxTensorAlign;   // byte_alignment of the pointers it will see
  bool operator==(const GraphTensor&) const = default;
};

// Row-major strides of `dims` (NCHW, KCRS, BHSD stored as written).
std::array<int64_t, 4> packed_strides(const std::array<int64_t, 4>& dims);
// Strides of [N, C, H, W] stored N, H, W, C (channels last: NHWC activations, KRSC filters).
std::array<int64_t, 4> channels_last_strides(const std::array<int64_t, 4>& dims);

struct ConvGeometry {
  int64_t pad = 0, stride = 1, dilation = 1;  // the same along rows and columns
  bool operator==(const ConvGeometry&) const = default;
};

struct SdpaOptions {
  bool causal = true;  // top-left aligned causal mask (GPT's)
  float scale = 1.0f;  // applied to q k^T before the softmax (1/sqrt(D) for GPT)
  bool operator==(const SdpaOptions&) const = default;
};

struct PlanKey {
  GraphOp op = GraphOp::ConvFprop;
  MathMode math = MathMode::Fma;
  uint8_t fusion = kFuseNone;  // ConvFusion bits, ConvFprop only
  ConvGeometry conv;           // Conv* only (default otherwise)
  SdpaOptions sdpa;            // Sdpa* only (default otherwise)
  std::vector<GraphTensor> tensors;  // in the op's order (GraphOp)
  int device = 0;                    // plans are bound to the device they were built on
  bool operator==(const PlanKey&) const = default;
  // "conv_fprop bf16 x[8,64,56,56] NHWC w[64,64,3,3] NHWC y[8,64,56,56] NHWC pad 1 stride 1 +bias
  //  +relu tensor16 math" (a tensor's layout is named when not packed, its alignment when < 16).
  std::string str() const;
};

struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const noexcept;
};

// What one choice is made over: tiers of alternative descriptions of one computation. The
// alternatives of a tier are timed against each other; a later tier (e.g. without the fused
// epilogue) is tried only when no engine runs any description of the earlier ones.
struct PlanChoiceKey {
  std::vector<std::vector<PlanKey>> tiers;
  bool operator==(const PlanChoiceKey&) const = default;
  std::string str() const;  // the first description of the first tier, and how many in all
};

struct PlanChoiceKeyHash {
  size_t operator()(const PlanChoiceKey& k) const noexcept;
};

// The workspace of cuDNN's deterministic attention backward (SdpaBprop; dptrain always asks for
// the deterministic one) for b samples of h heads, s_q queries and s_kv keys: on Hopper before
// cuDNN 9.25 cudnn-frontend 1.32 keeps dP in the workspace, b h ceil64(s_q) ceil64(s_kv) 16-bit
// values, beside the rows' softmax sums, b h s_q f32 (scaled_dot_product_flash_attention.h). It
// grows with the batch: GPT-2 124M at batch 16 (h 12, s 1024) needs 403,439,616 bytes. Pure.
int64_t sdpa_bprop_workspace_bytes(int64_t b, int64_t h, int64_t s_q, int64_t s_kv);

// The most workspace a plan of `k` may use, given train.workspace_mb's `cap`: the cap, except for
// the attention backward, whose deterministic engines are the only ones dptrain may run: capped
// below their need they would all be deselected, and the layer would fall back to the own kernel
// (f32 probabilities, (b, h, s, s) per layer: far more memory than the workspace). Its limit is
// the larger of the cap and sdpa_bprop_workspace_bytes with an eighth more for the engine's own
// buffers. Pure.
size_t plan_workspace_limit(const PlanKey& k, size_t cap);

// "" when `k` describes its op consistently; else what is wrong, e.g. "conv_fprop: y is
// [2,4,5,5], the convolution gives [2,4,6,6]". Checks the tensor count and dtypes per op, the
// shapes against each other (convolution output size, groups, attention heads), strides and
// sizes >= 1, the head dim (a multiple of 8, at most 256, unit stride), 16-bit attention and the
// math mode against the data type.
std::string validate_plan_key(const PlanKey& k);

}  // namespace dp::cuda
