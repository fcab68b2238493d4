#include "models/layers/attention/attention.h"

#include "models/layers/attention/attention_gpu_core.h"
#include "models/layers/attention/attention_ref.h"
#include "models/layers/attention/attention_saved.h"
#include "models/layers/common.h"
#include "models/layers/dropout/dropout.h"
#include "models/layers/dropout/dropout_ref.h"
#include "models/layers/linear/linear_ref.h"

namespace dp::models {

CausalSelfAttention::CausalSelfAttention(std::string name, const Options& o) : Layer(std::move(name)), o_(o) {}

Shape CausalSelfAttention::setup(const std::vector<Shape>& in) {
  expect_single_input_rank(*this, in, 2, "[T, C] (a sequence of T vectors)");
  T_ = in[0][0], C_ = in[0][1];
  if (C_ % o_.n_head != 0)
    DP_THROW_USER("{}: the input has C = {} features, which n_head = {} does not divide (for a GPT model: model.n_embd "
                  "must be a multiple of model.n_head)",
                  layer_str(*this), C_, o_.n_head);
  D_ = C_ / o_.n_head;
  return in[0];
}

std::vector<ParamDecl> CausalSelfAttention::declare_params() const {
  std::vector<ParamDecl> p{{"c_attn.weight", {3 * C_, C_}, true, DType::F32, init_normal(o_.init_std)}};
  if (o_.bias) p.push_back({"c_attn.bias", {3 * C_}, true, DType::F32, nullptr});
  p.push_back({"c_proj.weight", {C_, C_}, true, DType::F32, init_normal(o_.proj_init_std)});
  if (o_.bias) p.push_back({"c_proj.bias", {C_}, true, DType::F32, nullptr});
  return p;
}

uint64_t CausalSelfAttention::attn_stream(uint64_t step) const { return Dropout::mask_stream(name_ + ".attn_dropout", step); }
uint64_t CausalSelfAttention::resid_stream(uint64_t step) const {
  return Dropout::mask_stream(name_ + ".resid_dropout", step);
}

CausalSelfAttention::Saved& CausalSelfAttention::saved() {
  if (!saved_) saved_.emplace();
  return *saved_;
}

void CausalSelfAttention::check_io(const Tensor& x, const Tensor& y, const char* what) const {
  const DType dt = x.dtype();
  check_batched(*this, x, dt, x.dim(0), {T_, C_}, "input");
  check_batched(*this, y, dt, x.dim(0), {T_, C_}, what);
  const size_t want = o_.bias ? 4u : 2u;
  DP_CHECK(params_.size() == want, "{}: {} parameters bound", layer_str(*this), params_.size());
  check_tensor(*this, params_[0], dt, {3 * C_, C_}, "c_attn.weight");
  check_tensor(*this, params_[o_.bias ? 2 : 1], dt, {C_, C_}, "c_proj.weight");
}

bool CausalSelfAttention::saved_for(const StepContext& ctx, const Tensor& x, bool onednn) const {
  return saved_ && saved_->x == x.raw() && saved_->step == ctx.step && saved_->training == ctx.training &&
         saved_->onednn == onednn && saved_->qkv.defined() && saved_->qkv.dtype() == x.dtype() &&
         saved_->qkv.dim(0) == x.dim(0);
}

void CausalSelfAttention::forward_cpu(const StepContext& ctx, const std::vector<Tensor>& x, Tensor& y) {
  check_io(x[0], y, "output");
  if (use_onednn(ctx, x[0].dtype())) return forward_onednn(ctx, x[0], &y);
  forward_ref(ctx, x[0], &y);
}

void CausalSelfAttention::backward_cpu(const StepContext& ctx, const std::vector<Tensor>& x, const Tensor&,
                                       const Tensor& dy, std::vector<Tensor>& dx) {
  check_io(x[0], dy, "output gradient");
  if (dx[0].defined()) check_batched(*this, dx[0], x[0].dtype(), x[0].dim(0), {T_, C_}, "input gradient");
  check_grads(*this, x[0].dtype());
  if (use_onednn(ctx, x[0].dtype())) return backward_onednn(ctx, x[0], dy, dx[0]);
  backward_ref(ctx, x[0], dy, dx[0]);
}

// qkv, P and att for x (and, with y, the output).
void CausalSelfAttention::forward_ref(const StepContext& ctx, const Tensor& x, Tensor* y) {
  Saved& s = saved();
  const int64_t N = x.dim(0), M = N * T_, H = o_.n_head;
  s.prepare(x.dtype(), {{N, T_, 3 * C_}, {N, o_.n_head, T_, T_}, {N, T_, C_}}, ctx.mem);
  const kernels::cpu::AttnDropout drop{ctx.training ? o_.dropout : 0.0, ctx.seed, attn_stream(ctx.step)};
  const Tensor* b = o_.bias ? &params_[1] : nullptr;
  const Tensor& wp = params_[o_.bias ? 2 : 1];
  dispatch_float(*this, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    kernels::cpu::linear_forward<T>(s.qkv.data<T>(), x.data<T>(), params_[0].data<T>(), b ? b->data<T>() : nullptr, M,
                                    C_, 3 * C_);
    kernels::cpu::attention_forward<T>(s.att.data<T>(), s.P.data<T>(), s.qkv.data<T>(), N, T_, H, D_, drop);
    if (!y) return;
    kernels::cpu::linear_forward<T>(y->data<T>(), s.att.data<T>(), wp.data<T>(),
                                    o_.bias ? params_[3].data<T>() : nullptr, M, C_, C_);
    if (ctx.training && o_.resid_dropout > 0)
      kernels::cpu::dropout_forward<T>(y->data<T>(), y->data<T>(), y->numel(), o_.resid_dropout, ctx.seed,
                                       resid_stream(ctx.step));
  });
  s.mark(x, ctx, false);
}

void CausalSelfAttention::backward_ref(const StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor& dx) {
  if (!saved_for(ctx, x, false)) forward_ref(ctx, x, nullptr);
  Saved& s = saved();
  const int64_t N = x.dim(0), M = N * T_;
  s.prepare_grads(x.dtype(), ctx.mem, ctx.training && o_.resid_dropout > 0);
  const kernels::cpu::AttnDropout drop{ctx.training ? o_.dropout : 0.0, ctx.seed, attn_stream(ctx.step)};
  const size_t wp = o_.bias ? 2 : 1;
  dispatch_float(*this, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* g = dy.data<T>();
    if (ctx.training && o_.resid_dropout > 0) {
      kernels::cpu::dropout_backward<T>(s.dy.data<T>(), g, dy.numel(), o_.resid_dropout, ctx.seed,
                                        resid_stream(ctx.step));
      g = s.dy.data<T>();
    }
    kernels::cpu::linear_backward<T>(s.datt.data<T>(), grads_[wp].data<T>(), o_.bias ? grads_[3].data<T>() : nullptr,
                                     g, s.att.data<T>(), params_[wp].data<T>(), M, C_, C_);
    kernels::cpu::attention_backward<T>(s.dqkv.data<T>(), s.datt.data<T>(), s.qkv.data<T>(), s.P.data<T>(), N, T_,
                                        o_.n_head, D_, drop);
    kernels::cpu::linear_backward<T>(data_or_null<T>(dx), grads_[0].data<T>(), o_.bias ? grads_[1].data<T>() : nullptr,
                                     s.dqkv.data<T>(), x.data<T>(), params_[0].data<T>(), M, C_, 3 * C_);
  });
}

namespace {
ArgSpec sdpa_arg() {
  ArgSpec a;
  a.name = "sdpa";
  a.kind = ArgKind::String;
  a.default_value = ArgValue{std::string("auto")};
  return a;
}
}  // namespace

void register_causal_self_attention(LayerRegistry& r) {
  r.add("causal_self_attention",
        {int_arg("n_head", std::nullopt, 1), bool_arg("bias", true), float_arg("dropout", 0.0, 0.0, 0.999),
         float_arg("resid_dropout", 0.0, 0.0, 0.999), float_arg("init_std", 0.02, 0.0),
         float_arg("proj_init_std", 0.02, 0.0), sdpa_arg()},
        [](const std::string& name, const LayerArgs& a) {
          CausalSelfAttention::Options o;
          o.n_head = a.i("n_head"), o.bias = a.b("bias"), o.dropout = a.f("dropout");
          o.resid_dropout = a.f("resid_dropout"), o.init_std = a.f("init_std"), o.proj_init_std = a.f("proj_init_std");
          o.sdpa = parse_sdpa_preference(a.s("sdpa"));  // a bad word is the cfg's error, at build time
          return std::make_unique<CausalSelfAttention>(name, o);
        });
}

}  // namespace dp::models
