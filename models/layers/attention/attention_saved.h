// defines: AttentionSaved, what the attention's forward keeps for its backward (qkv,
// the probabilities, the heads' output) and the backward's own buffers, each allocated once per
// shape, and whose forward they are of.
#pragma once
#include "runtime/layer.h"
#include "runtime/tensor.h"

namespace dp::models {

struct AttentionSaved {
  Tensor qkv, P, att;       // (N, T, 3C), the probabilities (path's layout), (N, T, C)
  Tensor dy, datt, dqkv;    // the backward's: dropped dy, d att, d qkv
  const void* x = nullptr;  // the forward these are of: input, step, mode, path
  uint64_t step = 0;
  bool training = false, onednn = false;

  // qkv, P, att of these shapes and dtype (kept when they already are).
  void prepare(DType dt, const std::vector<Shape>& shapes) {
    Tensor* t[] = {&qkv, &P, &att};
    for (size_t i = 0; i < 3; ++i)
      if (!t[i]->defined() || t[i]->dtype() != dt || t[i]->shape() != shapes[i]) *t[i] = Tensor::zeros(shapes[i], dt);
    x = nullptr;
  }
  // dy, datt, dqkv like att, att and qkv.
  void prepare_grads(DType dt) {
    const Tensor* like[] = {&att, &att, &qkv};
    Tensor* t[] = {&dy, &datt, &dqkv};
    for (size_t i = 0; i < 3; ++i)
      if (!t[i]->defined() || t[i]->dtype() != dt || t[i]->shape() != like[i]->shape())
        *t[i] = Tensor::zeros(like[i]->shape(), dt);
  }
  void mark(const Tensor& in, const StepContext& ctx, bool on_onednn) {
    x = in.raw(), step = ctx.step, training = ctx.training, onednn = on_onednn;
  }
};

}  // namespace dp::models
