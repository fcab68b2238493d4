#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/optim.h"
#include "kernels/cuda/vec_pass.cuh"
#include "kernels/optim_math.h"

namespace dp::kernels::cuda {
namespace {

constexpr int kW = vec_width(sizeof(float));  // 4 f32 per vector (a 16-bit copy: 8 bytes)

// The 16-bit copy a kernel instance writes (a template parameter: no per-element branch).
enum class Copy16 { None, Bf16, F16 };

template <Copy16 C>
__device__ __forceinline__ uint16_t round16(float v) {
  if constexpr (C == Copy16::Bf16) return __bfloat16_as_ushort(__float2bfloat16_rn(v));
  else return __half_as_ushort(__float2half_rn(v));
}

// After the update of p[i .. i + V): the copy, when this instance writes one.
template <Copy16 C, int V>
__device__ __forceinline__ void write_copy(uint16_t* lp, int64_t i, const Pack<float, V>& p) {
  if constexpr (C != Copy16::None) {
    Pack<uint16_t, V> c;
    for (int k = 0; k < V; ++k) c.v[k] = round16<C>(p.v[k]);
    store_pack<V>(lp + i, c);
  }
}

// The scalars travel by value in the kernel's parameter space (constant bank), one copy for
// every thread.
template <Copy16 C>
__global__ void sgd_kernel(float* p, const float* g, float* buf, int64_t n, SgdScalars s, uint16_t* lp,
                           VecSplit split, DecaySkips skips) {
  const SgdScalars plain = without_decay(s);
  vec_for_each<kW>(n, split, [&](int64_t i, auto w) {
    constexpr int V = decltype(w)::value;
    Pack<float, V> pi = load_pack<V>(p + i), bi;
    const Pack<float, V> gi = load_pack<V>(g + i);
    if (buf && !s.first_step) bi = load_pack<V>(buf + i);
    else
      for (int k = 0; k < V; ++k) bi.v[k] = 0.0f;
    for (int k = 0; k < V; ++k)
      sgd_update(pi.v[k], gi.v[k], bi.v[k], skips.count > 0 && decay_skipped(skips, i + k) ? plain : s);
    store_pack<V>(p + i, pi);
    if (buf) store_pack<V>(buf + i, bi);
    write_copy<C, V>(lp, i, pi);
  });
}

template <Copy16 C>
__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, int64_t n, AdamWScalars s, uint16_t* lp,
                             VecSplit split, DecaySkips skips) {
  const AdamWScalars plain = without_decay(s);
  vec_for_each<kW>(n, split, [&](int64_t i, auto w) {
    constexpr int V = decltype(w)::value;
    Pack<float, V> pi = load_pack<V>(p + i), mi = load_pack<V>(m + i), vi = load_pack<V>(v + i);
    const Pack<float, V> gi = load_pack<V>(g + i);
    for (int k = 0; k < V; ++k)
      adamw_update(pi.v[k], gi.v[k], mi.v[k], vi.v[k], skips.count > 0 && decay_skipped(skips, i + k) ? plain : s);
    store_pack<V>(p + i, pi);
    store_pack<V>(m + i, mi);
    store_pack<V>(v + i, vi);
    write_copy<C, V>(lp, i, pi);
  });
}

Copy16 copy_kind(const ParamCopy16& c) {
  if (c.dst == nullptr) return Copy16::None;
  return c.bf16 ? Copy16::Bf16 : Copy16::F16;
}

// fn(std::integral_constant<Copy16, C>{}) for the copy's kind.
template <typename Fn>
cudaError_t with_copy_kind(const ParamCopy16& c, Fn&& fn) {
  switch (copy_kind(c)) {
    case Copy16::None: return fn(std::integral_constant<Copy16, Copy16::None>{});
    case Copy16::Bf16: return fn(std::integral_constant<Copy16, Copy16::Bf16>{});
    case Copy16::F16: return fn(std::integral_constant<Copy16, Copy16::F16>{});
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t sgd_step(float* p, const float* g, float* buf, int64_t n, const SgdScalars& s, cudaStream_t stream,
                     ParamCopy16 copy, DecaySkips skips) {
  if (n < 0 || (s.momentum != 0.0f && !buf) || skips.count < 0 || (skips.count > 0 && !skips.bounds))
    return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  float* b = s.momentum != 0.0f ? buf : nullptr;
  const VecSplit sp = vec_split(n, kW, {{p, 4}, {g, 4}, {b, 4}, {copy.dst, 2}});
  return with_copy_kind(copy, [&](auto c) {
    DP_LAUNCH(sgd_kernel<decltype(c)::value>, pass_grid(sp, n), kThreads, 0, stream)(p, g, b, n, s, copy.dst, sp,
                                                                                      skips);
    DP_RETURN_LAUNCH();
  });
}

cudaError_t adamw_step(float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& s,
                       cudaStream_t stream, ParamCopy16 copy, DecaySkips skips) {
  if (n < 0 || skips.count < 0 || (skips.count > 0 && !skips.bounds)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const VecSplit sp = vec_split(n, kW, {{p, 4}, {g, 4}, {m, 4}, {v, 4}, {copy.dst, 2}});
  return with_copy_kind(copy, [&](auto c) {
    DP_LAUNCH(adamw_kernel<decltype(c)::value>, pass_grid(sp, n), kThreads, 0, stream)(p, g, m, v, n, s, copy.dst,
                                                                                        sp, skips);
    DP_RETURN_LAUNCH();
  });
}

}  // namespace dp::kernels::cuda
