// CausalSelfAttention's oneDNN path (f32): the projections on kernels/cpu/onednn_matmul.h's
// LinearMatmul over the (N T, C) rows, the attention core on flash_core.h (FlashAttention's tiles
// on or below the diagonal only, an online softmax; the probabilities kept in its packed layout:
// measured faster than recomputing them, docs/cpu-performance.md). The forward keeps
// qkv, the packed probabilities and the heads' output (in a CPU graph in the step plan's kept
// bytes); the backward's buffers (d att, d qkv, the dropped dy) are the plan's scratch, or, for a
// layer run alone, the shared scratch slots of kernels/cpu/onednn.h.
#include "kernels/cpu/onednn_matmul.h"
#include "models/layers/attention/attention.h"
#include "models/layers/attention/attention_saved.h"
#include "models/layers/attention/flash_core.h"
#include "models/layers/common.h"
#include "models/layers/linear/linear_gemm_choice.h"
#include "models/layers/dropout/dropout_ref.h"


namespace dp::models {

namespace dn = kernels::cpu::onednn;

struct CausalSelfAttention::OnednnState {
  OnednnState(const std::string& where, int64_t C, bool bias)
      : c_attn(where + " c_attn", C, 3 * C, bias), c_proj(where + " c_proj", C, C, bias) {}
  dn::LinearMatmul c_attn, c_proj;
};

namespace {
// `floats` f32 of this thread's scratch slot (kernels/cpu/onednn.h: grown once, then reused).
float* slot_floats(dn::Slot slot, int64_t floats) {
  dnnl::memory m = dn::unbound(dn::plain_md({floats}, dn::Tag::a));
  return static_cast<float*>(dn::scratch(m, slot).get_data_handle());
}

}  // namespace

void CausalSelfAttention::forward_onednn(const StepContext& ctx, const Tensor& x, Tensor* y) {
  Saved& s = saved();
  OnednnState& st = onednn_state();
  const int64_t N = x.dim(0), M = N * T_, H = o_.n_head;
  s.prepare(DType::F32, {{N, T_, 3 * C_}, {N, H, kernels::cpu::FlashKept(T_).packed}, {N, T_, C_}}, ctx.mem);
  const kernels::cpu::AttnDropout drop{ctx.training ? o_.dropout : 0.0, ctx.seed, attn_stream(ctx.step)};
  const dn::GemmLibrary lib = linear_gemm(ctx);
  st.c_attn.forward(lib, s.qkv.data<float>(), x.data<float>(), params_[0].data<float>(),
                    o_.bias ? params_[1].data<float>() : nullptr, M);
  kernels::cpu::flash_forward(s.att.data<float>(), nullptr, s.P.data<float>(), s.qkv.data<float>(), N, T_, H, D_,
                              drop);
  s.mark(x, ctx, true);
  if (!y) return st.c_proj.drop_bf16_casts();  // s.att refilled: c_proj's bf16 copy of it is stale
  st.c_proj.forward(lib, y->data<float>(), s.att.data<float>(), params_[o_.bias ? 2 : 1].data<float>(),
                    o_.bias ? params_[3].data<float>() : nullptr, M);
  if (ctx.training && o_.resid_dropout > 0)
    kernels::cpu::dropout_forward<float>(y->data<float>(), y->data<float>(), y->numel(), o_.resid_dropout, ctx.seed,
                                         resid_stream(ctx.step));
}

void CausalSelfAttention::backward_onednn(const StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor& dx) {
  if (!saved_for(ctx, x, true)) forward_onednn(ctx, x, nullptr);
  Saved& s = saved();
  OnednnState& st = onednn_state();
  const int64_t N = x.dim(0), M = N * T_, H = o_.n_head;
  const kernels::cpu::AttnDropout drop{ctx.training ? o_.dropout : 0.0, ctx.seed, attn_stream(ctx.step)};
  const dn::GemmLibrary lib = linear_gemm(ctx);
  // The step plan's scratch (d att, d qkv, the dropped dy: backward_needs), else the shared slots.
  const bool planned = ctx.mem.arena != nullptr;
  const auto buffer = [&](dn::Slot slot, int64_t floats, size_t at) {
    return planned ? ctx.mem.scratch({floats}, DType::F32, at).data<float>() : slot_floats(slot, floats);
  };
  float* datt = buffer(dn::Slot::A, M * C_, 0);
  float* dqkv = buffer(dn::Slot::B, M * 3 * C_, static_cast<size_t>(M * C_) * sizeof(float));
  const float* g = dy.data<float>();
  if (ctx.training && o_.resid_dropout > 0) {
    float* gd = buffer(dn::Slot::C, M * C_, static_cast<size_t>(M * 4 * C_) * sizeof(float));
    kernels::cpu::dropout_backward<float>(gd, g, dy.numel(), o_.resid_dropout, ctx.seed, resid_stream(ctx.step));
    g = gd;
  }
  const size_t wp = o_.bias ? 2 : 1;
  st.c_proj.backward_weights(lib, grads_[wp].data<float>(), o_.bias ? grads_[3].data<float>() : nullptr, g,
                             s.att.data<float>(), M);
  st.c_proj.backward_data(lib, datt, g, params_[wp].data<float>(), M);
  kernels::cpu::flash_backward(dqkv, datt, s.qkv.data<float>(), s.att.data<float>(), nullptr, s.P.data<float>(), N,
                               T_, H, D_, drop);
  st.c_attn.backward_weights(lib, grads_[0].data<float>(), o_.bias ? grads_[1].data<float>() : nullptr, dqkv,
                             x.data<float>(), M);
  if (dx.defined()) st.c_attn.backward_data(lib, dx.data<float>(), dqkv, params_[0].data<float>(), M);
}

CausalSelfAttention::OnednnState& CausalSelfAttention::onednn_state() {
  if (!dnnl_) dnnl_.emplace(layer_str(*this), C_, o_.bias);
  return *dnnl_;
}

}  // namespace dp::models
