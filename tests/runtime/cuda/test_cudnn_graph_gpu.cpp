// The cuDNN graph-API wrapper on a GPU (runtime/cuda/cudnn_graph.h): causal scaled-dot-product
// attention forward (with the log-sum-exp stats) and backward in bf16, in GPT's fused-QKV layout
// and in contiguous [B, H, S, D] tensors, against a float64 reference computed here; a plan is
// chosen once per key (the cache), a malformed key is refused before cuDNN sees it, and a plan
// refuses pointers less aligned than it was chosen for, and the attention backward runs with a
// workspace cap below its need. Skips without a GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/gpu_test.h"
#include "runtime/device_memory.h"

#ifdef DPTRAIN_HAVE_CUDA
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "base/half.h"
#include "base/rng.h"
#include "runtime/cuda/buffers.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/cudnn_graph.h"
#include "runtime/cuda/exec_context.h"
#include "models/layers/attention/sdpa_keys.h"
#include "tests/models/layers/attention/sdpa_test_layout.h"

namespace dp::cuda {
namespace {

using ::testing::HasSubstr;

// Host copies of the attention tensors as logical [B, H, S, D] arrays of doubles (values
// representable in bf16), and the device buffers they are uploaded into with a layout's strides.
struct Attention {
  SdpaShape s;
  SdpaLayout l;
  std::vector<double> q, k, v, d_o;  // inputs, logical BHSD
};

size_t at(const SdpaShape& s, int64_t b, int64_t h, int64_t i, int64_t d) {
  return static_cast<size_t>(((b * s.h + h) * s.s_q + i) * s.d + d);
}

double bf16_round(double x) {
  return kernels::cpu::bf16_to_f32(kernels::cpu::f32_to_bf16(static_cast<float>(x)));
}

std::vector<double> random_bf16(size_t n, Rng& rng) {
  std::vector<double> v(n);
  for (auto& e : v) e = bf16_round(rng.normal());
  return v;
}

// Writes the logical BHSD values into `host` with strides `st` (elements), from element `off`.
void place(std::vector<uint16_t>& host, size_t off, const SdpaShape& s, const std::array<int64_t, 4>& st,
           const std::vector<double>& v) {
  for (int64_t b = 0; b < s.b; ++b)
    for (int64_t h = 0; h < s.h; ++h)
      for (int64_t i = 0; i < s.s_q; ++i)
        for (int64_t d = 0; d < s.d; ++d)
          host.at(off + static_cast<size_t>(b * st[0] + h * st[1] + i * st[2] + d * st[3])) =
              kernels::cpu::f32_to_bf16(static_cast<float>(v[at(s, b, h, i, d)]));
}

// The logical BHSD values read with strides `st` from element `off` of a bf16 host copy.
std::vector<double> take(const std::vector<uint16_t>& host, size_t off, const SdpaShape& s,
                         const std::array<int64_t, 4>& st) {
  std::vector<double> v(static_cast<size_t>(s.b * s.h * s.s_q * s.d));
  for (int64_t b = 0; b < s.b; ++b)
    for (int64_t h = 0; h < s.h; ++h)
      for (int64_t i = 0; i < s.s_q; ++i)
        for (int64_t d = 0; d < s.d; ++d)
          v[at(s, b, h, i, d)] =
              kernels::cpu::bf16_to_f32(host.at(off + static_cast<size_t>(b * st[0] + h * st[1] + i * st[2] + d * st[3])));
  return v;
}

std::vector<uint16_t> to_host(const DeviceBuffer& buf) {
  std::vector<uint16_t> host(buf.bytes() / 2);
  CHECK_CUDA(cudaMemcpy(host.data(), buf.data(), host.size() * 2, cudaMemcpyDeviceToHost));
  return host;
}

// Causal attention in float64: o = softmax(scale q k^T, masked above the diagonal) v, the
// natural-log log-sum-exp of each row's scaled scores, and the gradients of <o, do>.
struct Reference {
  std::vector<double> o, lse, dq, dk, dv;
};

Reference reference(const Attention& a, double scale) {
  const SdpaShape& s = a.s;
  const int64_t S = s.s_q, D = s.d;
  Reference r;
  const size_t n = a.q.size();
  r.o.assign(n, 0), r.dq.assign(n, 0), r.dk.assign(n, 0), r.dv.assign(n, 0);
  r.lse.assign(static_cast<size_t>(s.b * s.h * S), 0);
  std::vector<double> p(static_cast<size_t>(S)), dp(static_cast<size_t>(S));
  for (int64_t b = 0; b < s.b; ++b)
    for (int64_t h = 0; h < s.h; ++h)
      for (int64_t i = 0; i < S; ++i) {
        double mx = -INFINITY, sum = 0, delta = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += a.q[at(s, b, h, i, d)] * a.k[at(s, b, h, j, d)];
          p[j] = scale * dot;
          mx = std::max(mx, p[j]);
        }
        for (int64_t j = 0; j <= i; ++j) sum += (p[j] = std::exp(p[j] - mx));
        r.lse[static_cast<size_t>((b * s.h + h) * S + i)] = mx + std::log(sum);
        for (int64_t j = 0; j <= i; ++j) p[j] /= sum;
        for (int64_t d = 0; d < D; ++d) {
          double o = 0;
          for (int64_t j = 0; j <= i; ++j) o += p[j] * a.v[at(s, b, h, j, d)];
          r.o[at(s, b, h, i, d)] = o;
          delta += o * a.d_o[at(s, b, h, i, d)];
        }
        for (int64_t j = 0; j <= i; ++j) {
          dp[j] = 0;
          for (int64_t d = 0; d < D; ++d) {
            dp[j] += a.d_o[at(s, b, h, i, d)] * a.v[at(s, b, h, j, d)];
            r.dv[at(s, b, h, j, d)] += p[j] * a.d_o[at(s, b, h, i, d)];
          }
          const double ds = p[j] * (dp[j] - delta) * scale;
          for (int64_t d = 0; d < D; ++d) {
            r.dq[at(s, b, h, i, d)] += ds * a.k[at(s, b, h, j, d)];
            r.dk[at(s, b, h, j, d)] += ds * a.q[at(s, b, h, i, d)];
          }
        }
      }
  return r;
}

double max_rel_error(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num = std::max(num, std::abs(got[i] - want[i]));
    den = std::max(den, std::abs(want[i]));
  }
  return den > 0 ? num / den : num;
}

void check_attention(bool fused_qkv) {
  SdpaShape s;
  s.b = 2, s.h = 3, s.s_q = 96, s.d = 64;
  const double scale = 1.0 / std::sqrt(64.0);
  Rng rng(11, 0);
  const size_t n = static_cast<size_t>(s.b * s.h * s.s_q * s.d);
  Attention a{s, fused_qkv ? sdpa_fused_qkv(s) : test::contiguous_bhsd(s), random_bf16(n, rng), random_bf16(n, rng),
              random_bf16(n, rng), random_bf16(n, rng)};
  const Reference ref = reference(a, scale);

  ExecContext gpu(0, size_t{256} << 20);
  // q, k, v (and dq, dk, dv) share one buffer of 3 n elements: the thirds of each [B, S, 3, H, D]
  // row (fused), or three [B, H, S, D] blocks one after another.
  const size_t hd = static_cast<size_t>(s.h * s.d);
  const size_t off[3] = {0, fused_qkv ? hd : n, fused_qkv ? 2 * hd : 2 * n};
  DeviceBuffer qkv(3 * n * 2, gpu.compute()), dqkv(3 * n * 2, gpu.compute());
  DeviceBuffer o(n * 2, gpu.compute()), d_o(n * 2, gpu.compute());
  DeviceBuffer lse(static_cast<size_t>(s.b * s.h * s.s_q) * 4, gpu.compute());
  std::vector<uint16_t> host(3 * n, 0), host_do(n, 0);
  place(host, off[0], s, a.l.q, a.q);
  place(host, off[1], s, a.l.k, a.k);
  place(host, off[2], s, a.l.v, a.v);
  place(host_do, 0, s, a.l.o, a.d_o);
  CHECK_CUDA(cudaMemcpy(qkv.data(), host.data(), host.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_o.data(), host_do.data(), host_do.size() * 2, cudaMemcpyHostToDevice));
  auto at_elem = [](const DeviceBuffer& buf, size_t e) -> void* { return static_cast<char*>(buf.data()) + 2 * e; };
  void *q = at_elem(qkv, off[0]), *k = at_elem(qkv, off[1]), *v = at_elem(qkv, off[2]);
  void *dq = at_elem(dqkv, off[0]), *dk = at_elem(dqkv, off[1]), *dv = at_elem(dqkv, off[2]);

  const SdpaOptions opt{true, static_cast<float>(scale)};
  std::vector<void*> fwd{q, k, v, o.data(), lse.data()};
  const PlanKey fkey = sdpa_fprop_key(s, a.l, opt, true, {q, k, v, o.data(), lse.data()}, 0);
  auto fplan = choose_graph_plan(gpu, {{{fkey, fwd}}}, "attention test");
  fplan->execute(gpu, fwd);
  std::vector<void*> bwd{q, k, v, o.data(), d_o.data(), lse.data(), dq, dk, dv};
  const PlanKey bkey = sdpa_bprop_key(s, a.l, opt, {q, k, v, o.data(), d_o.data(), lse.data(), dq, dk, dv}, 0);
  auto bplan = choose_graph_plan(gpu, {{{bkey, bwd}}}, "attention test");
  bplan->execute(gpu, bwd);
  CHECK_CUDA(cudaDeviceSynchronize());

  // bf16 outputs (8 significant bits) of f32 sums, and flash attention's bf16 probabilities.
  EXPECT_LT(max_rel_error(take(to_host(o), 0, s, a.l.o), ref.o), 2e-2) << "o";
  std::vector<float> lse_f(ref.lse.size());
  CHECK_CUDA(cudaMemcpy(lse_f.data(), lse.data(), lse_f.size() * 4, cudaMemcpyDeviceToHost));
  EXPECT_LT(max_rel_error(std::vector<double>(lse_f.begin(), lse_f.end()), ref.lse), 1e-3) << "stats";
  const std::vector<uint16_t> grads = to_host(dqkv);
  EXPECT_LT(max_rel_error(take(grads, off[0], s, a.l.q), ref.dq), 4e-2) << "dq";
  EXPECT_LT(max_rel_error(take(grads, off[1], s, a.l.k), ref.dk), 4e-2) << "dk";
  EXPECT_LT(max_rel_error(take(grads, off[2], s, a.l.v), ref.dv), 4e-2) << "dv";

  // The backward is deterministic: run again on the same inputs, the same bits.
  CHECK_CUDA(cudaMemset(dqkv.data(), 0, 3 * n * 2));
  bplan->execute(gpu, bwd);
  CHECK_CUDA(cudaDeviceSynchronize());
  EXPECT_EQ(to_host(dqkv), grads) << "a second backward gave other bits";

  // The same key again is the cached plan.
  EXPECT_EQ(choose_graph_plan(gpu, {{{fkey, fwd}}}, "attention test"), fplan);
}

DP_GPU_TEST(CudnnGraphGpu, CausalAttentionInGptsFusedQkvLayoutMatchesTheReference) {
  check_attention(true);
}

DP_GPU_TEST(CudnnGraphGpu, CausalAttentionInContiguousTensorsMatchesTheReference) {
  check_attention(false);
}

DP_GPU_TEST(CudnnGraphGpu, AMalformedKeyAndAMisalignedPointerAreRefused) {
  ExecContext gpu(0, size_t{64} << 20);
  SdpaShape s;
  s.b = 1, s.h = 1, s.s_q = 64, s.d = 36;  // head dim not a multiple of 8
  PlanKey bad = sdpa_fprop_key(s, test::contiguous_bhsd(s), {}, false, {}, 0);
  try {
    choose_graph_plan(gpu, {{{bad, {nullptr, nullptr, nullptr, nullptr}}}}, "layer 'attn'");
    FAIL() << "expected DpError";
  } catch (const DpError& e) {
    EXPECT_THAT(e.what(), HasSubstr("layer 'attn': sdpa_fprop: head dim 36"));
  }
  s.d = 64;
  const size_t n = 64 * 64;
  DeviceBuffer buf(4 * n * 2 + 16, gpu.compute());
  char* p = static_cast<char*>(buf.data());
  std::vector<void*> ptrs{p, p + n * 2, p + 2 * n * 2, p + 3 * n * 2};
  const PlanKey key =
      sdpa_fprop_key(s, test::contiguous_bhsd(s), {true, 0.125f}, false, {ptrs[0], ptrs[1], ptrs[2], ptrs[3]}, 0);
  auto plan = choose_graph_plan(gpu, {{{key, ptrs}}}, "layer 'attn'");
  ptrs[3] = p + 3 * n * 2 + 2;  // o only 2-byte aligned now
  try {
    plan->execute(gpu, ptrs);
    FAIL() << "expected DpError";
  } catch (const DpError& e) {
    EXPECT_THAT(e.what(), HasSubstr("is less aligned than the 16 bytes the plan was chosen for"));
  }
}

// The deterministic backward keeps dP in its workspace, N H ceil64(T)^2 16-bit values
// (graph_plan_key.h sdpa_bprop_workspace_bytes): with train.workspace_mb below that need it still
// gets a plan, under its own limit (plan_workspace_limit), where capping it left no engine and the
// layer on the own kernel. Zero inputs give zero gradients.
DP_GPU_TEST(CudnnGraphGpu, TheAttentionBackwardRunsWithAWorkspaceCapBelowItsNeed) {
  SdpaShape s;
  s.b = 2, s.h = 3, s.s_q = 256, s.d = 64;
  const size_t cap = size_t{64} << 10;
  ASSERT_GT(static_cast<size_t>(sdpa_bprop_workspace_bytes(s.b, s.h, s.s_q, s.s_q)), cap);
  ExecContext gpu(0, cap);
  const size_t n = static_cast<size_t>(s.b * s.h * s.s_q * s.d), hd = static_cast<size_t>(s.h * s.d);
  DeviceBuffer qkv(3 * n * 2, gpu.compute()), dqkv(3 * n * 2, gpu.compute());
  DeviceBuffer o(n * 2, gpu.compute()), d_o(n * 2, gpu.compute());
  DeviceBuffer lse(static_cast<size_t>(s.b * s.h * s.s_q) * 4, gpu.compute());
  for (const DeviceBuffer* b : {&qkv, &dqkv, &o, &d_o, &lse}) CHECK_CUDA(cudaMemset(b->data(), 0, b->bytes()));
  char* q = static_cast<char*>(qkv.data());
  char* dq = static_cast<char*>(dqkv.data());
  std::vector<void*> bwd{q, q + hd * 2, q + 2 * hd * 2, o.data(), d_o.data(), lse.data(), dq, dq + hd * 2, dq + 2 * hd * 2};
  const PlanKey key = sdpa_bprop_key(s, sdpa_fused_qkv(s), {true, 0.125f},
                                     {bwd[0], bwd[1], bwd[2], bwd[3], bwd[4], bwd[5], bwd[6], bwd[7], bwd[8]}, 0);
  auto plan = choose_graph_plan(gpu, {{{key, bwd}}}, "layer 'attn'");
  EXPECT_LE(static_cast<size_t>(plan->workspace_bytes()), plan_workspace_limit(key, cap));
  std::printf("attention backward at [2, 3, 256, 64]: %s, %lld bytes of workspace (cap %zu)\n", plan->engine().c_str(),
              static_cast<long long>(plan->workspace_bytes()), cap);
  CHECK_CUDA(cudaMemset(dqkv.data(), 0xFF, dqkv.bytes()));
  plan->execute(gpu, bwd);
  CHECK_CUDA(cudaDeviceSynchronize());
  size_t nonzero = 0;  // a zero of either sign
  for (uint16_t v : to_host(dqkv)) nonzero += (v & 0x7FFF) != 0;
  EXPECT_EQ(nonzero, 0u);
}

}  // namespace
}  // namespace dp::cuda
#endif  // DPTRAIN_HAVE_CUDA
