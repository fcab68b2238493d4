// defines: LinearDescs and LinearPrimitives, the three oneDNN matmul primitives of one fully
// connected product, built per (M, ReLU) from the operands' memory descriptors, and their calls
// with our buffers bound. The one build of LinearMatmul's f32 path (kernels/cpu/onednn_matmul.h)
// and of Bf16Matmul's bf16 x bf16 -> f32 path (kernels/cpu/onednn_matmul_bf16.h):
//   forward          y (M, O) = x (M, I) w_t (I, O) + b   (bias (1, O) and an optional ReLU post-op)
//   backward_data    dx (M, I) = dy (M, O) w (O, I)
//   backward_weights dw (O, I) += dy_t (O, M) x (M, I)     (oneDNN's sum post-op)
// Every primitive's scratchpad is this thread's (kernels/cpu/onednn.h scratch()).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "kernels/cpu/onednn.h"

namespace dp::kernels::cpu::onednn {

// The operands' descriptors at one M: their data types and how our buffers are read (W (O, I)
// read as (I, O) through its strides for w_t; dy (M, O) read as (O, M) for dy_t).
struct LinearDescs {
  memory::desc x, w_t, b, y;  // forward: src, weights, bias, dst
  memory::desc dy, w, dx;     // backward_data: src, weights, dst
  memory::desc dy_t, dw;      // backward_weights: src, dst (its weights: x)
};

// descs(M, in, out, ld_out): the descriptors for M rows of an (in -> out) product whose y and dy
// rows are ld_out apart (>= out; > out: a padded output).
using LinearDescsFn = LinearDescs (*)(int64_t M, int64_t in, int64_t out, int64_t ld_out);

class LinearPrimitives {
 public:
  // `where` names the user in oneDNN's errors ("layer 'fc1' (linear)").
  LinearPrimitives(std::string where, int64_t in, int64_t out, bool bias, LinearDescsFn descs, int64_t ld_out = 0);
  // b is read only with bias.
  void forward(void* y, const void* x, const void* w_t, const void* b, int64_t M, bool relu);
  void backward_data(void* dx, const void* dy, const void* w, int64_t M);
  void backward_weights(void* dw, const void* dy_t, const void* x, int64_t M);

 private:
  // One backward product dst = src weights: its primitive and its operands, unbound until run.
  struct Product {
    Product() = default;
    Product(const dnnl::matmul::primitive_desc& pd, const memory::desc& src_md, const memory::desc& weights_md,
            const memory::desc& dst_md);
    void run(void* dst_p, const void* src_p, const void* weights_p);  // with this thread's scratchpad
    dnnl::matmul prim;
    memory src, weights, dst, pad;  // pad: the scratchpad
  };
  struct Entry {
    dnnl::matmul fwd;
    memory x, w_t, b, y, scratch_f;
    Product bwd_d, bwd_w;  // backward_data (dy w), backward_weights (dy_t x)
  };
  Entry& entry(int64_t M, bool relu);  // made on the first call at (M, relu)
  std::string where_;
  int64_t in_, out_, ld_out_;
  bool bias_;
  LinearDescsFn descs_;
  std::map<std::pair<int64_t, bool>, Entry> entries_;
};

}  // namespace dp::kernels::cpu::onednn
