// defines: AttentionSaved, what the attention's forward keeps for its backward (qkv,
// the probabilities, the heads' output) and the backward's own buffers, and whose forward they
// are of: in a CPU graph the step plan's kept bytes and scratch (StepContext::mem, in that order,
// as backward_needs declares them), else allocated once per shape.
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

  // qkv, P, att of these shapes and dtype: the plan's kept bytes, or their own (kept when they
  // already are).
  void prepare(DType dt, const std::vector<Shape>& shapes, const LayerMemory& mem) {
    Tensor* t[] = {&qkv, &P, &att};
    place(t, shapes.data(), 3, dt, mem, true, planned_kept);
    x = nullptr;
  }
  // datt, dqkv like att and qkv, and with `dropped_dy` dy like att: the plan's scratch, or their own.
  void prepare_grads(DType dt, const LayerMemory& mem, bool dropped_dy) {
    Tensor* t[] = {&datt, &dqkv, &dy};
    const Shape shapes[] = {att.shape(), qkv.shape(), att.shape()};
    place(t, shapes, dropped_dy ? 3 : 2, dt, mem, false, planned_scratch);
  }
  void mark(const Tensor& in, const StepContext& ctx, bool on_onednn) {
    x = in.raw(), step = ctx.step, training = ctx.training, onednn = on_onednn;
  }

 private:
  bool planned_kept = false, planned_scratch = false;  // the tensors are views of a step plan's arena
  static void place(Tensor* const* t, const Shape* shapes, size_t n, DType dt, const LayerMemory& mem, bool kept,
                    bool& planned) {
    size_t offset = 0;
    for (size_t i = 0; i < n; ++i) {
      Tensor v = kept ? mem.kept(shapes[i], dt, offset) : mem.scratch(shapes[i], dt, offset);
      offset += bytes_of(shapes[i], dt);
      if (v.defined()) *t[i] = std::move(v);
      else if (planned || !t[i]->defined() || t[i]->dtype() != dt || t[i]->shape() != shapes[i])
        *t[i] = Tensor::zeros(shapes[i], dt);
    }
    planned = mem.arena != nullptr;
  }
};


}  // namespace dp::models
