#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "models/layers/batchnorm2d/batchnorm2d_reduce.h"
#include "models/layers/batchnorm2d/batchnorm2d_vec.cuh"
#include "kernels/cuda/convert.cuh"
#include "kernels/cuda/dispatch.cuh"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/shared_memory.cuh"

namespace dp::kernels::cuda {
namespace {
using bn::load_pack;
using bn::Pack;

constexpr int kBlock = 256;       // threads of a stage-1 block
constexpr int kMaxVec = 8;        // values per 16-byte load, at most (16-bit data)
constexpr int64_t kMinPerThread = 8;  // rows (NHWC) or vectors (NCHW) per thread before another chunk
constexpr int kFinishWarps = 8;   // stage 2: one warp per channel, 8 channels per block
constexpr unsigned kFullMask = 0xFFFFFFFFu;

// One thread's accumulators: L lanes (NHWC: the channels of its group; NCHW: one channel).
// Welford: n values seen (the same for every lane), a = mean, b = M2. Sums: a = sum g,
// b = sum g (x - mean), n unused.
template <int L>
struct Acc {
  float n = 0;
  float a[L] = {};
  float b[L] = {};
};

// Chan et al.'s pairwise update: (n, mean, m2) += (nb, mb, m2b).
template <typename F>
__device__ __forceinline__ void chan_merge(F& n, F& mean, F& m2, F nb, F mb, F m2b) {
  if (nb == 0) return;
  const F nn = n + nb, f = nb / nn, delta = mb - mean;
  mean += delta * f;
  m2 += m2b + delta * delta * n * f;
  n = nn;
}

// Welford over x.
template <typename T>
struct WelfordOp {
  const T* x;
  template <int L>
  struct Channels {};
  template <int L>
  __device__ Channels<L> channels(int64_t) const {
    return {};
  }
  // NHWC: one row of L channels; the count is shared, so one reciprocal serves every lane.
  template <int L>
  __device__ void row(Acc<L>& s, const Channels<L>&, int64_t off) const {
    const Pack<T, L> p = load_pack<L>(x + off);
    s.n += 1;
    const float inv = 1.0f / s.n;
#pragma unroll
    for (int k = 0; k < L; ++k) {
      const float v = to_f32(p.v[k]), d = v - s.a[k];
      s.a[k] += d * inv;
      s.b[k] += d * (v - s.a[k]);
    }
  }
  // NCHW: V values of one channel: their own mean and M2, merged into the running triple.
  template <int V>
  __device__ void vec(Acc<1>& s, const Channels<1>& ch, int64_t off) const {
    if constexpr (V == 1) {
      row<1>(s, ch, off);
    } else {
      const Pack<T, V> p = load_pack<V>(x + off);
      float v[V], sum = 0;
#pragma unroll
      for (int k = 0; k < V; ++k) v[k] = to_f32(p.v[k]), sum += v[k];
      const float m = sum * (1.0f / V);
      float q = 0;
#pragma unroll
      for (int k = 0; k < V; ++k) q += (v[k] - m) * (v[k] - m);
      chan_merge(s.n, s.a[0], s.b[0], static_cast<float>(V), m, q);
    }
  }
  template <int L>
  __device__ static void combine(Acc<L>& s, const Acc<L>& o) {
    if (o.n == 0) return;
    const float nn = s.n + o.n, f = o.n / nn;
#pragma unroll
    for (int k = 0; k < L; ++k) {
      const float delta = o.a[k] - s.a[k];
      s.a[k] += delta * f;
      s.b[k] += o.b[k] + delta * delta * s.n * f;
    }
    s.n = nn;
  }
};

// Sums of g = dy (relu_y null) or dy where relu_y > 0, and of g (x - mean).
template <typename T>
struct GradOp {
  const T* dy;
  const T* relu_y;
  const T* x;
  const float* mean;
  template <int L>
  struct Channels {
    float mean[L];
  };
  template <int L>
  __device__ Channels<L> channels(int64_t c0) const {
    Channels<L> ch;
#pragma unroll
    for (int k = 0; k < L; ++k) ch.mean[k] = mean[c0 + k];
    return ch;
  }
  template <int V, int L>
  __device__ void add(Acc<L>& s, const Channels<L>& ch, int64_t off) const {
    const Pack<T, V> g = load_pack<V>(dy + off), xv = load_pack<V>(x + off);
    Pack<T, V> yv{};
    if (relu_y) yv = load_pack<V>(relu_y + off);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const int lane = L == 1 ? 0 : k;
      const float gv = relu_y && !(to_f32(yv.v[k]) > 0.0f) ? 0.0f : to_f32(g.v[k]);
      s.a[lane] += gv;
      s.b[lane] += gv * (to_f32(xv.v[k]) - ch.mean[lane]);
    }
  }
  template <int L>
  __device__ void row(Acc<L>& s, const Channels<L>& ch, int64_t off) const {
    add<L, L>(s, ch, off);
  }
  template <int V>
  __device__ void vec(Acc<1>& s, const Channels<1>& ch, int64_t off) const {
    add<V, 1>(s, ch, off);
  }
  template <int L>
  __device__ static void combine(Acc<L>& s, const Acc<L>& o) {
#pragma unroll
    for (int k = 0; k < L; ++k) s.a[k] += o.a[k], s.b[k] += o.b[k];
  }
};

// The block's threads' accumulators in shared memory: row 0 the counts, rows 1..L the a's,
// rows L+1..2L the b's; column = linear thread index. (Red: the shared array under nvcc, the
// emulator's checked view otherwise, hence the forwarding reference.)
template <int L, typename Red>
__device__ __forceinline__ void put(Red&& red, int tid, const Acc<L>& s) {
  red[0][tid] = s.n;
#pragma unroll
  for (int k = 0; k < L; ++k) red[1 + k][tid] = s.a[k], red[1 + L + k][tid] = s.b[k];
}
template <int L, typename Red>
__device__ __forceinline__ Acc<L> get(Red&& red, int tid) {
  Acc<L> s;
  s.n = red[0][tid];
#pragma unroll
  for (int k = 0; k < L; ++k) s.a[k] = red[1 + k][tid], s.b[k] = red[1 + L + k][tid];
  return s;
}

// Stage 1, NHWC. Block (bx, by), grid (tiles, chunks): thread (tx, ty) of block (t, p) owns the
// channel group g = t * bx + tx (channels g*V .. g*V+V-1) and the rows begin+ty, begin+ty+by, ...
// of chunk p; the block combines its threads along ty (a fixed tree; by is a power of two).
// partial: (chunks, 2, C) f32.
template <typename Op, int V>
__global__ void reduce_nhwc_kernel(float* partial, Op op, int64_t C, int64_t M, int64_t chunk_len) {
  DP_SHARED(float, red, [1 + 2 * kMaxVec][kBlock]);
  const int tx = threadIdx.x, ty = threadIdx.y, bx = blockDim.x, by = blockDim.y, tid = ty * bx + tx;
  const int64_t c0 = (blockIdx.x * int64_t(bx) + tx) * V;
  const int64_t begin = blockIdx.y * chunk_len, end = min(M, begin + chunk_len);
  Acc<V> s;
  if (c0 < C) {
    const auto ch = op.template channels<V>(c0);
    for (int64_t m = begin + ty; m < end; m += by) op.template row<V>(s, ch, m * C + c0);
  }
  put(red, tid, s);
  __syncthreads();
  for (int w = by / 2; w > 0; w >>= 1) {
    if (ty < w) {
      Op::combine(s, get<V>(red, tid + w * bx));
      put(red, tid, s);
    }
    __syncthreads();
  }
  if (ty == 0 && c0 < C) {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      partial[(blockIdx.y * 2) * C + c0 + k] = s.a[k];
      partial[(blockIdx.y * 2 + 1) * C + c0 + k] = s.b[k];
    }
  }
}

// Stage 1, NCHW. Block (bx), grid (C, chunks): block (c, p) reads vectors j of chunk p of channel
// c, vector j holding values [j V, j V + V) of the channel in plane order (V divides HW, so a
// vector never spans two planes); the block combines its threads in a fixed tree.
template <typename Op, int V>
__global__ void reduce_nchw_kernel(float* partial, Op op, int64_t C, int64_t HW, int64_t Mv, int64_t chunk_len) {
  DP_SHARED(float, red, [3][kBlock]);
  const int tid = threadIdx.x, bx = blockDim.x;
  const int64_t c = blockIdx.x, hwv = HW / V;
  const int64_t begin = blockIdx.y * chunk_len, end = min(Mv, begin + chunk_len);
  Acc<1> s;
  const auto ch = op.template channels<1>(c);
  for (int64_t j = begin + tid; j < end; j += bx) {
    const int64_t n = j / hwv;
    op.template vec<V>(s, ch, (n * C + c) * HW + (j - n * hwv) * V);
  }
  put(red, tid, s);
  __syncthreads();
  for (int w = bx / 2; w > 0; w >>= 1) {
    if (tid < w) {
      Op::combine(s, get<1>(red, tid + w));
      put(red, tid, s);
    }
    __syncthreads();
  }
  if (tid == 0) {
    partial[(blockIdx.y * 2) * C + c] = s.a[0];
    partial[(blockIdx.y * 2 + 1) * C + c] = s.b[0];
  }
}

// Values behind chunk p's partial: units (rows or vectors) in the chunk times values per unit.
__device__ __forceinline__ double chunk_count(int64_t p, int64_t chunk_len, int64_t units, int per_unit) {
  return static_cast<double>(min(chunk_len, units - p * chunk_len) * per_unit);
}

// Stage 2 of the statistics: warp w of block b takes channel c = 8b + w; lane l merges chunks l,
// l+32, ... in f64, then lanes merge down a fixed tree to lane 0, which finishes the channel.
__global__ void welford_finish_kernel(float* mean_out, float* invstd_out, float* scale_out, float* running_mean,
                                      float* running_var, const float* partial, const float* w, int64_t C,
                                      int64_t chunks, int64_t chunk_len, int64_t units, int per_unit,
                                      double momentum, double eps, bool update) {
  const int lane = threadIdx.x % 32;
  const int64_t c = blockIdx.x * int64_t(kFinishWarps) + threadIdx.x / 32;
  if (c >= C) return;  // the whole warp
  double n = 0, mean = 0, m2 = 0;
  for (int64_t p = lane; p < chunks; p += 32)
    chan_merge(n, mean, m2, chunk_count(p, chunk_len, units, per_unit), static_cast<double>(partial[(p * 2) * C + c]),
               static_cast<double>(partial[(p * 2 + 1) * C + c]));
  for (int off = 16; off > 0; off >>= 1) {
    const double nb = __shfl_down_sync(kFullMask, n, off), mb = __shfl_down_sync(kFullMask, mean, off),
                 m2b = __shfl_down_sync(kFullMask, m2, off);
    if (lane < off) chan_merge(n, mean, m2, nb, mb, m2b);
  }
  if (lane != 0) return;
  const double var = m2 / n, is = 1.0 / sqrt(var + eps);
  mean_out[c] = static_cast<float>(mean);
  invstd_out[c] = static_cast<float>(is);
  scale_out[c] = static_cast<float>(static_cast<double>(w[c]) * is);
  if (update) {
    // The CPU twin's operations in its order, each rounded (no fused multiply-add).
    const double unbias = n / (n - 1), keep = 1 - momentum;
    running_mean[c] = static_cast<float>(
        __dadd_rn(__dmul_rn(keep, static_cast<double>(running_mean[c])), __dmul_rn(momentum, mean)));
    running_var[c] = static_cast<float>(__dadd_rn(__dmul_rn(keep, static_cast<double>(running_var[c])),
                                                  __dmul_rn(__dmul_rn(momentum, var), unbias)));
  }
}

// Stage 2 of the backward sums, laid out as welford_finish_kernel; lane 0 accumulates the
// parameter gradients and writes dx's coefficients.
__global__ void grad_finish_kernel(float* dw, float* db, float* k_out, float* c1_out, float* c2_out,
                                   const float* partial, const float* invstd, const float* w, int64_t C,
                                   int64_t chunks, double count, bool batch_stats) {
  const int lane = threadIdx.x % 32;
  const int64_t c = blockIdx.x * int64_t(kFinishWarps) + threadIdx.x / 32;
  if (c >= C) return;
  double s1 = 0, s2 = 0;
  for (int64_t p = lane; p < chunks; p += 32) {
    s1 += static_cast<double>(partial[(p * 2) * C + c]);
    s2 += static_cast<double>(partial[(p * 2 + 1) * C + c]);
  }
  for (int off = 16; off > 0; off >>= 1) {
    const double o1 = __shfl_down_sync(kFullMask, s1, off), o2 = __shfl_down_sync(kFullMask, s2, off);
    if (lane < off) s1 += o1, s2 += o2;
  }
  if (lane != 0) return;
  const double is = invstd[c], sum_gxhat = s2 * is, k = static_cast<double>(w[c]) * is;
  dw[c] = __fadd_rn(dw[c], static_cast<float>(sum_gxhat));
  db[c] = __fadd_rn(db[c], static_cast<float>(s1));
  k_out[c] = static_cast<float>(k);
  c1_out[c] = batch_stats ? static_cast<float>(-k * s1 / count) : 0.0f;
  c2_out[c] = batch_stats ? static_cast<float>(k * is * sum_gxhat / count) : 0.0f;
}

bool valid(const BnDims& d) { return d.N >= 0 && d.C >= 0 && d.HW >= 0; }
bool float_dtype(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }

// Stage 1 for op over d with plan p, into partial.
template <typename Op>
cudaError_t run_stage1(float* partial, const Op& op, const BnDims& d, const BnReducePlan& p, int vmax,
                       cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.tiles), static_cast<unsigned>(p.chunks));
  const dim3 block(static_cast<unsigned>(p.block_x), static_cast<unsigned>(p.block_y));
  const int64_t M = d.N * d.HW;
  if (d.nhwc) {
    if (p.vec == 1) DP_LAUNCH(reduce_nhwc_kernel<Op, 1>, grid, block, 0, stream)(partial, op, d.C, M, p.chunk_len);
    else if (vmax == 4) DP_LAUNCH(reduce_nhwc_kernel<Op, 4>, grid, block, 0, stream)(partial, op, d.C, M, p.chunk_len);
    else DP_LAUNCH(reduce_nhwc_kernel<Op, 8>, grid, block, 0, stream)(partial, op, d.C, M, p.chunk_len);
  } else {
    const int64_t Mv = M / p.vec;
    if (p.vec == 1)
      DP_LAUNCH(reduce_nchw_kernel<Op, 1>, grid, block, 0, stream)(partial, op, d.C, d.HW, Mv, p.chunk_len);
    else if (vmax == 4)
      DP_LAUNCH(reduce_nchw_kernel<Op, 4>, grid, block, 0, stream)(partial, op, d.C, d.HW, Mv, p.chunk_len);
    else
      DP_LAUNCH(reduce_nchw_kernel<Op, 8>, grid, block, 0, stream)(partial, op, d.C, d.HW, Mv, p.chunk_len);
  }
  return cudaGetLastError();
}

int max_vec(DType dtype) { return static_cast<int>(16 / dtype_size(dtype)); }

}  // namespace

BnReducePlan batchnorm_reduce_plan(const BnDims& d, DType dtype, bool vectorisable) {
  BnReducePlan p;
  if (!valid(d) || !float_dtype(dtype) || d.C == 0) return p;
  const int vmax = max_vec(dtype);
  const int64_t M = d.N * d.HW;
  int64_t units = 0, per_block = 0;  // rows or vectors to cover; of them per block and pass
  if (d.nhwc) {
    p.vec = vectorisable && d.C % vmax == 0 ? vmax : 1;
    const int64_t groups = d.C / p.vec;
    p.block_x = 1;
    while (p.block_x < groups && p.block_x < 32) p.block_x *= 2;
    p.block_y = kBlock / p.block_x;
    p.tiles = (groups + p.block_x - 1) / p.block_x;
    units = M;
    per_block = p.block_y;
  } else {
    p.vec = vectorisable && d.HW % vmax == 0 ? vmax : 1;
    p.block_x = kBlock;
    p.block_y = 1;
    p.tiles = d.C;
    units = M / p.vec;
    per_block = kBlock;
  }
  // As many chunks as give each thread kMinPerThread units, within kBnMaxReduceBlocks blocks in
  // all (at least one chunk, however many tiles).
  const int64_t by_size = (units + per_block * kMinPerThread - 1) / (per_block * kMinPerThread);
  const int64_t by_blocks = kBnMaxReduceBlocks / p.tiles;
  p.chunks = std::max<int64_t>(1, std::min(by_size, by_blocks));
  p.chunk_len = (units + p.chunks - 1) / p.chunks;
  if (p.chunk_len > 0) p.chunks = (units + p.chunk_len - 1) / p.chunk_len;  // none empty
  return p;
}

size_t batchnorm_reduce_scratch_bytes(const BnDims& d, DType dtype) {
  size_t most = 0;
  for (bool v : {false, true}) {
    const BnReducePlan p = batchnorm_reduce_plan(d, dtype, v);
    most = std::max(most, static_cast<size_t>(p.chunks * 2 * d.C) * sizeof(float));
  }
  return most;
}

cudaError_t batchnorm_welford_stats(float* mean, float* invstd, float* scale, float* running_mean,
                                    float* running_var, const void* x, DType dtype, const float* w, const BnDims& d,
                                    double momentum, double eps, bool update_running, void* scratch,
                                    size_t scratch_bytes, cudaStream_t stream) {
  const int64_t M = d.N * d.HW;
  if (!valid(d) || !float_dtype(dtype) || !(eps > 0) || !(momentum >= 0 && momentum <= 1)) return cudaErrorInvalidValue;
  if (d.C == 0) return cudaSuccess;
  if (!mean || !invstd || !scale || !x || !w || !scratch || M < (update_running ? 2 : 1) ||
      (update_running && (!running_mean || !running_var)) || scratch_bytes < batchnorm_reduce_scratch_bytes(d, dtype))
    return cudaErrorInvalidValue;
  const BnReducePlan p = batchnorm_reduce_plan(d, dtype, bn::aligned16(x));
  float* partial = static_cast<float*>(scratch);
  const cudaError_t e = dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    return run_stage1(partial, WelfordOp<T>{static_cast<const T*>(x)}, d, p, max_vec(dtype), stream);
  });
  if (e != cudaSuccess) return e;
  const int64_t units = d.nhwc ? M : M / p.vec;
  const int per_unit = d.nhwc ? 1 : p.vec;
  DP_LAUNCH(welford_finish_kernel, static_cast<unsigned>((d.C + kFinishWarps - 1) / kFinishWarps), kFinishWarps * 32, 0,
            stream)(mean, invstd, scale, running_mean, running_var, partial, w, d.C, p.chunks, p.chunk_len, units,
                    per_unit, momentum, eps, update_running);
  DP_RETURN_LAUNCH();
}

cudaError_t batchnorm_backward_reduce(float* dw, float* db, float* k, float* c1, float* c2, const void* dy,
                                      const void* relu_y, const void* x, DType dtype, const float* mean,
                                      const float* invstd, const float* w, bool batch_stats, const BnDims& d,
                                      void* scratch, size_t scratch_bytes, cudaStream_t stream) {
  const int64_t M = d.N * d.HW;
  if (!valid(d) || !float_dtype(dtype)) return cudaErrorInvalidValue;
  if (d.C == 0) return cudaSuccess;
  if (!dw || !db || !k || !c1 || !c2 || !dy || !x || !mean || !invstd || !w || !scratch ||
      (batch_stats && M < 1) || scratch_bytes < batchnorm_reduce_scratch_bytes(d, dtype))
    return cudaErrorInvalidValue;
  const bool vec = bn::aligned16(dy) && bn::aligned16(relu_y) && bn::aligned16(x);
  const BnReducePlan p = batchnorm_reduce_plan(d, dtype, vec);
  float* partial = static_cast<float*>(scratch);
  const cudaError_t e = dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    const GradOp<T> op{static_cast<const T*>(dy), static_cast<const T*>(relu_y), static_cast<const T*>(x), mean};
    return run_stage1(partial, op, d, p, max_vec(dtype), stream);
  });
  if (e != cudaSuccess) return e;
  DP_LAUNCH(grad_finish_kernel, static_cast<unsigned>((d.C + kFinishWarps - 1) / kFinishWarps), kFinishWarps * 32, 0,
            stream)(dw, db, k, c1, c2, partial, invstd, w, d.C, p.chunks, static_cast<double>(M), batch_stats);
  DP_RETURN_LAUNCH();
}

}  // namespace dp::kernels::cuda
