#include "runtime/cuda/graph_plan_key.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <utility>

#include "base/alignment.h"
#include "base/hash.h"

namespace dp::cuda {

const char* graph_op_name(GraphOp op) {
  switch (op) {
    case GraphOp::ConvFprop: return "conv_fprop";
    case GraphOp::ConvDgrad: return "conv_dgrad";
    case GraphOp::ConvWgrad: return "conv_wgrad";
    case GraphOp::SdpaFprop: return "sdpa_fprop";
    case GraphOp::SdpaBprop: return "sdpa_bprop";
  }
  return "?";
}

const char* math_mode_name(MathMode m) {
  switch (m) {
    case MathMode::Fma: return "fma";
    case MathMode::Tf32: return "tf32";
    case MathMode::Tensor16: return "tensor16";
  }
  return "?";
}

std::vector<NumericNote> deselected_notes(MathMode m) {
  if (m == MathMode::Fma)
    return {NumericNote::TensorCore, NumericNote::DownConvertInputs, NumericNote::ReducedPrecisionReduction};
  return {NumericNote::ReducedPrecisionReduction};
}

int64_t byte_alignment(const void* p) { return address_alignment(p, kMaxTensorAlign); }

std::array<int64_t, 4> packed_strides(const std::array<int64_t, 4>& d) {
  return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1};
}

std::array<int64_t, 4> channels_last_strides(const std::array<int64_t, 4>& d) {
  return {d[1] * d[2] * d[3], 1, d[3] * d[1], d[1]};
}

namespace {

std::string dims_str(const std::array<int64_t, 4>& d) { return fmt::format("[{},{},{},{}]", d[0], d[1], d[2], d[3]); }

std::string tensor_str(const char* name, const GraphTensor& t, DType io) {
  std::string s = fmt::format("{}{}", name, dims_str(t.dims));
  if (t.strides == channels_last_strides(t.dims) && t.strides != packed_strides(t.dims)) s += " NHWC";
  else if (t.strides != packed_strides(t.dims)) s += fmt::format(" strides {}", dims_str(t.strides));
  if (t.dtype != io) s += fmt::format(" {}", dtype_name(t.dtype));
  if (t.align < kMaxTensorAlign) s += fmt::format(" align {}", t.align);
  return s;
}

// The tensors' names in the op's order (GraphOp's table).
std::vector<const char*> tensor_names(const PlanKey& k) {
  switch (k.op) {
    case GraphOp::ConvFprop:
      if (k.fusion & kFuseBias) return {"x", "w", "bias", "y"};
      return {"x", "w", "y"};
    case GraphOp::ConvDgrad: return {"dy", "w", "dx"};
    case GraphOp::ConvWgrad: return {"x", "dy", "dw"};
    case GraphOp::SdpaFprop:
      if (k.tensors.size() == 5) return {"q", "k", "v", "o", "stats"};
      return {"q", "k", "v", "o"};
    case GraphOp::SdpaBprop: return {"q", "k", "v", "o", "do", "stats", "dq", "dk", "dv"};
  }
  return {};
}

bool is_conv(GraphOp op) { return op == GraphOp::ConvFprop || op == GraphOp::ConvDgrad || op == GraphOp::ConvWgrad; }

// Folds v into h through splitmix64's finaliser (Steele et al., OOPSLA'14), as the legacy
// algorithm cache does: keys that differ by small numbers in one field do not collide.
void mix(size_t& h, uint64_t v) { hash_combine(h, v); }

}  // namespace

std::string PlanKey::str() const {
  const DType io = tensors.empty() ? DType::F32 : tensors[0].dtype;
  std::string s = fmt::format("{} {}", graph_op_name(op), dtype_name(io));
  const std::vector<const char*> names = tensor_names(*this);
  for (size_t i = 0; i < tensors.size(); ++i)
    s += fmt::format(" {}", tensor_str(i < names.size() ? names[i] : "t", tensors[i], io));
  if (is_conv(op)) {
    s += fmt::format(" pad {} stride {}", conv.pad, conv.stride);
    if (conv.dilation != 1) s += fmt::format(" dilation {}", conv.dilation);
  } else {
    s += fmt::format(" {}scale {:g}", sdpa.causal ? "causal " : "", sdpa.scale);
  }
  if (fusion & kFuseBias) s += " +bias";
  if (fusion & kFuseRelu) s += " +relu";
  s += fmt::format(" {} math", math_mode_name(math));
  if (device != 0) s += fmt::format(" on cuda:{}", device);
  return s;
}

size_t PlanKeyHash::operator()(const PlanKey& k) const noexcept {
  size_t h = 0;
  mix(h, static_cast<uint64_t>(k.op) | (uint64_t{static_cast<uint8_t>(k.math)} << 8) | (uint64_t{k.fusion} << 16) |
             (uint64_t{k.sdpa.causal} << 24));
  mix(h, std::bit_cast<uint32_t>(k.sdpa.scale));
  for (int64_t v : {k.conv.pad, k.conv.stride, k.conv.dilation, static_cast<int64_t>(k.device)})
    mix(h, static_cast<uint64_t>(v));
  for (const GraphTensor& t : k.tensors) {
    for (int64_t v : t.dims) mix(h, static_cast<uint64_t>(v));
    for (int64_t v : t.strides) mix(h, static_cast<uint64_t>(v));
    mix(h, static_cast<uint64_t>(t.dtype) | (static_cast<uint64_t>(t.align) << 8));
  }
  return h;
}

std::string PlanChoiceKey::str() const {
  size_t n = 0;
  for (const auto& tier : tiers) n += tier.size();
  if (n == 0) return "(no description)";
  const std::string first = tiers.front().empty() ? "?" : tiers.front().front().str();
  return n == 1 ? first : fmt::format("{} (1 of {} descriptions)", first, n);
}

size_t PlanChoiceKeyHash::operator()(const PlanChoiceKey& k) const noexcept {
  size_t h = 0;
  for (const auto& tier : k.tiers) {
    mix(h, tier.size());
    for (const PlanKey& key : tier) mix(h, PlanKeyHash{}(key));
  }
  return h;
}

namespace {

using Dims = std::array<int64_t, 4>;

// (x + 2 pad - dilation (r - 1) - 1) / stride + 1: PyTorch's and cuDNN's output size.
int64_t conv_out(int64_t x, int64_t r, const ConvGeometry& g) {
  return (x + 2 * g.pad - g.dilation * (r - 1) - 1) / g.stride + 1;
}

std::string check_conv(const PlanKey& k, const Dims& x, const Dims& w, const Dims& y) {
  const char* op = graph_op_name(k.op);
  if (k.conv.pad < 0 || k.conv.stride < 1 || k.conv.dilation < 1)
    return fmt::format("{}: pad {} stride {} dilation {} (pad >= 0, stride and dilation >= 1)", op, k.conv.pad,
                       k.conv.stride, k.conv.dilation);
  if (x[1] % w[1] != 0)
    return fmt::format("{}: x has {} channels, not a multiple of the filter's {} per group", op, x[1], w[1]);
  const int64_t groups = x[1] / w[1];
  if (w[0] % groups != 0) return fmt::format("{}: {} filters do not split into {} groups", op, w[0], groups);
  const Dims want{x[0], w[0], conv_out(x[2], w[2], k.conv), conv_out(x[3], w[3], k.conv)};
  if (want[2] < 1 || want[3] < 1)
    return fmt::format("{}: a {}x{} filter does not fit x {} with pad {}", op, w[2], w[3], dims_str(x), k.conv.pad);
  if (y != want)
    return fmt::format("{}: {} is {}, the convolution gives {}", op, k.op == GraphOp::ConvDgrad ? "dy" : "y",
                       dims_str(y), dims_str(want));
  return "";
}

std::string check_conv_key(const PlanKey& k) {
  const auto& t = k.tensors;
  const bool bias = k.op == GraphOp::ConvFprop && (k.fusion & kFuseBias);
  const size_t want = bias ? 4 : 3;
  if (t.size() != want)
    return fmt::format("{}: {} tensors, expected {}", graph_op_name(k.op), t.size(), want);
  if (k.op != GraphOp::ConvFprop && k.fusion != kFuseNone)
    return fmt::format("{}: a fused epilogue is only for conv_fprop", graph_op_name(k.op));
  for (const GraphTensor& g : t)
    if (g.dtype != t[0].dtype)
      return fmt::format("{}: tensors of dtypes {} and {}", graph_op_name(k.op), dtype_name(t[0].dtype),
                         dtype_name(g.dtype));
  switch (k.op) {
    case GraphOp::ConvFprop: {
      const Dims& y = t.back().dims;
      if (bias && t[2].dims != Dims{1, y[1], 1, 1})
        return fmt::format("conv_fprop: bias is {}, expected [1,{},1,1]", dims_str(t[2].dims), y[1]);
      return check_conv(k, t[0].dims, t[1].dims, y);
    }
    case GraphOp::ConvDgrad: return check_conv(k, t[2].dims, t[1].dims, t[0].dims);
    default: return check_conv(k, t[0].dims, t[2].dims, t[1].dims);
  }
}

std::string check_sdpa_key(const PlanKey& k) {
  const auto& t = k.tensors;
  const char* op = graph_op_name(k.op);
  const bool fwd = k.op == GraphOp::SdpaFprop;
  if (fwd ? (t.size() != 4 && t.size() != 5) : t.size() != 9)
    return fmt::format("{}: {} tensors, expected {}", op, t.size(), fwd ? "4 (inference) or 5 (with stats)" : "9");
  if (k.fusion != kFuseNone) return fmt::format("{}: a fused epilogue is only for conv_fprop", op);
  const DType io = t[0].dtype;
  if (io != DType::BF16 && io != DType::F16)
    return fmt::format("{}: cuDNN's fused attention takes bf16 or f16, not {}", op, dtype_name(io));
  if (k.math != MathMode::Tensor16) return fmt::format("{}: {} math, expected tensor16", op, math_mode_name(k.math));
  if (!(std::isfinite(k.sdpa.scale) && k.sdpa.scale > 0))
    return fmt::format("{}: scale {} must be finite and > 0", op, k.sdpa.scale);
  const Dims &q = t[0].dims, &kk = t[1].dims, &v = t[2].dims, &o = t[3].dims;
  if (kk[0] != q[0] || v[0] != q[0] || o[0] != q[0] || v[1] != kk[1] || v[2] != kk[2] || kk[3] != q[3])
    return fmt::format("{}: q {}, k {}, v {} do not fit together (k and v share heads and length, q and k the head "
                       "dim, all the batch)",
                       op, dims_str(q), dims_str(kk), dims_str(v));
  if (q[1] % kk[1] != 0) return fmt::format("{}: {} query heads are not a multiple of {} key heads", op, q[1], kk[1]);
  if (o != Dims{q[0], q[1], q[2], v[3]})
    return fmt::format("{}: o is {}, expected {}", op, dims_str(o), dims_str(Dims{q[0], q[1], q[2], v[3]}));
  for (int64_t d : {q[3], v[3]})
    if (d % 8 != 0 || d > 256)
      return fmt::format("{}: head dim {} (cuDNN's fused attention needs a multiple of 8, at most 256)", op, d);
  for (size_t i = 0; i < t.size(); ++i) {
    const bool stats = (fwd && i == 4) || (!fwd && i == 5);
    if (stats) {
      if (t[i].dtype != DType::F32 || t[i].dims != Dims{q[0], q[1], q[2], 1})
        return fmt::format("{}: stats is {} {}, expected f32 {}", op, dtype_name(t[i].dtype), dims_str(t[i].dims),
                           dims_str(Dims{q[0], q[1], q[2], 1}));
      continue;
    }
    if (t[i].dtype != io) return fmt::format("{}: tensors of dtypes {} and {}", op, dtype_name(io), dtype_name(t[i].dtype));
    if (t[i].strides[3] != 1) return fmt::format("{}: the head dim must have stride 1", op);
  }
  if (!fwd) {
    // The gradients have their forward tensors' shapes: do like o, dq like q, dk like k, dv like v.
    const std::pair<size_t, size_t> like[] = {{4, 3}, {6, 0}, {7, 1}, {8, 2}};
    const char* names[] = {"o", "q", "k", "v"};
    for (size_t i = 0; i < 4; ++i)
      if (t[like[i].first].dims != t[like[i].second].dims)
        return fmt::format("{}: d{} is {}, expected {}'s shape {}", op, names[i], dims_str(t[like[i].first].dims),
                           names[i], dims_str(t[like[i].second].dims));
  }
  return "";
}

}  // namespace

int64_t sdpa_bprop_workspace_bytes(int64_t b, int64_t h, int64_t s_q, int64_t s_kv) {
  const auto ceil64 = [](int64_t s) { return (s + 63) / 64 * 64; };
  return b * h * ceil64(s_q) * ceil64(s_kv) * 2 + b * h * s_q * 4;
}

size_t plan_workspace_limit(const PlanKey& k, size_t cap) {
  if (k.op != GraphOp::SdpaBprop || k.tensors.size() < 2) return cap;
  const auto& q = k.tensors[0].dims;  // [B, H, S, D]
  const auto need = static_cast<size_t>(sdpa_bprop_workspace_bytes(q[0], q[1], q[2], k.tensors[1].dims[2]));
  return std::max(cap, need + need / 8);
}

std::string validate_plan_key(const PlanKey& k) {
  for (const GraphTensor& t : k.tensors) {
    for (int i = 0; i < 4; ++i)
      if (t.dims[i] < 1 || t.strides[i] < 1)
        return fmt::format("{}: a tensor of dims {} and strides {} (each must be >= 1)", graph_op_name(k.op),
                           dims_str(t.dims), dims_str(t.strides));
    if (t.align < 1 || t.align > kMaxTensorAlign || (t.align & (t.align - 1)) != 0)
      return fmt::format("{}: alignment {} (a power of two, at most {})", graph_op_name(k.op), t.align, kMaxTensorAlign);
  }
  if (!k.tensors.empty() && is_conv(k.op)) {
    const DType io = k.tensors[0].dtype;
    const bool f32 = io == DType::F32;
    if (io != DType::F32 && io != DType::BF16 && io != DType::F16)
      return fmt::format("{}: cuDNN convolves f32, bf16 or f16, not {}", graph_op_name(k.op), dtype_name(io));
    if (f32 == (k.math == MathMode::Tensor16))
      return fmt::format("{}: {} math for {} data ({})", graph_op_name(k.op), math_mode_name(k.math), dtype_name(io),
                         f32 ? "f32 takes fma or tf32" : "16-bit data takes tensor16");
  }
  return is_conv(k.op) ? check_conv_key(k) : check_sdpa_key(k);
}

}  // namespace dp::cuda
