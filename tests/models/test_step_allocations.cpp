// defines: the counting allocator test of the CPU memory plan: after the first step, a training
// step of the Fashion-MNIST CNN (forward, backward, AdamW over the flat arena) asks the heap for
// no buffer of a page or more, on both CPU backends.
//
// The counter is the heap itself: this binary defines malloc, calloc, realloc, aligned_alloc,
// posix_memalign and memalign (forwarding to glibc's __libc_* entry points, free stays glibc's),
// so every allocation of the process is seen: tensors, oneDNN's scratchpads and weight copies,
// BLAS buffers, std containers. Small allocations (< 4 KiB: oneDNN's argument maps, lambdas) are
// counted but not asserted on: they come from malloc's free lists and never touch the kernel,
// while the large ones are what cost page faults every step (mmap'd or trimmed from the heap top).
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdlib>

#include "models/build.h"
#include "runtime/optim/optimizer.h"
#include "tests/models/layer_harness.h"

// Under AddressSanitizer the sanitizer owns malloc (replacing it here breaks its start-up), so the
// sanitizer build (tools/ci/sanitize.sh) leaves the counter out and skips the test.
#if defined(__SANITIZE_ADDRESS__)
#define DP_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DP_TEST_UNDER_ASAN 1
#endif
#endif
#ifndef DP_TEST_UNDER_ASAN
#define DP_TEST_UNDER_ASAN 0
#endif

#if !DP_TEST_UNDER_ASAN
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
}
#endif

namespace {

constexpr size_t kLarge = 4096;
std::atomic<bool> g_counting{false};
std::atomic<long> g_all{0}, g_large{0};

[[maybe_unused]] inline void count(size_t bytes) {  // unused under ASan (no malloc hooks there)
  if (!g_counting.load(std::memory_order_relaxed)) return;
  g_all.fetch_add(1, std::memory_order_relaxed);
  if (bytes >= kLarge) g_large.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

#if !DP_TEST_UNDER_ASAN
extern "C" {
void* malloc(size_t n) {
  count(n);
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t size) {
  count(n * size);
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t n) {
  count(n);
  return __libc_realloc(p, n);
}
void* memalign(size_t align, size_t n) {
  count(n);
  return __libc_memalign(align, n);
}
void* aligned_alloc(size_t align, size_t n) {
  count(n);
  return __libc_memalign(align, n);
}
int posix_memalign(void** out, size_t align, size_t n) {
  if (align % sizeof(void*) != 0 || (align & (align - 1)) != 0) return EINVAL;
  count(n);
  void* p = __libc_memalign(align, n);
  if (p == nullptr && n != 0) return ENOMEM;
  *out = p;
  return 0;
}
}
#endif  // !DP_TEST_UNDER_ASAN

namespace dp {
namespace {

struct Counts {
  long all = 0, large = 0;
};

class StepAllocations : public ::testing::TestWithParam<CpuBackend> {};

TEST_P(StepAllocations, NoLargeHeapAllocationAfterTheFirstStep) {
  if (DP_TEST_UNDER_ASAN) GTEST_SKIP() << "AddressSanitizer owns malloc: the counting allocator is left out";
  ModelConfig mc;
  mc.preset = PresetKind::Cnn;
  auto g = models::build_model(mc, {1, 28, 28}, /*seed=*/3);
  g->set_cpu_backend(GetParam());
  auto opt = optim::make_adamw(g->num_parameters(), {});
  Tensor x = Tensor::zeros({32, 1, 28, 28}), dy = Tensor::zeros({32, 10});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>((i * 7919) % 255) / 255.0f;
  for (int64_t i = 0; i < dy.numel(); ++i) dy.data<float>()[i] = (i % 10 == 3) ? -0.1f : 0.01f;
  auto step = [&](uint64_t s) {
    const StepContext ctx{true, s, 0};
    g->zero_grad();
    g->forward(ctx, x);
    g->backward(ctx, dy);
    opt->step(g->params().flat(), g->grads().flat(), 1e-3);
  };
  step(0);
  auto counted = [&](uint64_t s) {
    g_all = 0, g_large = 0;
    g_counting = true;
    step(s);
    g_counting = false;
    return Counts{g_all.load(), g_large.load()};
  };
  Counts c;
  for (uint64_t s = 1; s <= 3; ++s) {
    c = counted(s);
    EXPECT_EQ(c.large, 0) << "step " << s << ": " << c.large << " heap allocations of " << kLarge
                          << " bytes or more (" << c.all << " in all)";
  }
  // A last partial batch, then the full batch again: the step arena of batch 32 holds batch 16's
  // plan (nothing reallocated), and the reference kernels need nothing new. oneDNN remakes
  // primitives when the shapes change (one large buffer in some of these steps: not the graph's,
  // whose arena stays as it was).
  const Tensor x32 = x, dy32 = dy;
  const size_t arena = g->step_arena_bytes();
  for (uint64_t s = 4; s <= 6; ++s) {
    x = s < 6 ? Tensor::zeros({16, 1, 28, 28}) : x32, dy = s < 6 ? Tensor::zeros({16, 10}) : dy32;
    const Counts c = counted(s);
    if (GetParam() == CpuBackend::Reference) {
      EXPECT_EQ(c.large, 0) << "step " << s << " (batch " << x.dim(0) << ")";
    }
    EXPECT_EQ(g->step_arena_bytes(), arena);
  }
  // The counter counts: a larger batch is a larger arena (and new primitives), and a tensor of a
  // page is one large allocation.
  x = Tensor::zeros({64, 1, 28, 28}), dy = Tensor::zeros({64, 10});
  EXPECT_GT(counted(7).large, 0);
  EXPECT_GT(g->step_arena_bytes(), arena);
  g_all = 0, g_large = 0;
  g_counting = true;
  Tensor t = Tensor::zeros({1024});
  g_counting = false;
  EXPECT_EQ(g_large.load(), 1);
  std::printf("[ info ] %s: %ld small heap allocations in a step after the first\n",
              std::string(enum_name(GetParam())).c_str(), c.all);
}

// The CIFAR ResNet-18 on oneDNN: its 3x3 layers of 64 channels and more run on Winograd, whose
// blocked copies of the activations live in the per-thread scratch slots, not in new buffers.
TEST(StepAllocations, ResnetOnWinogradAllocatesNothingLargeAfterTheFirstStep) {
  if (DP_TEST_UNDER_ASAN) GTEST_SKIP() << "AddressSanitizer owns malloc: the counting allocator is left out";
  ModelConfig mc;
  mc.preset = PresetKind::CifarResnet18;
  auto g = models::build_model(mc, {3, 32, 32}, /*seed=*/3);
  g->set_cpu_backend(CpuBackend::OneDnn);
  g->set_cpu_conv_algorithm(CpuConvAlgorithm::Auto);
  auto opt = optim::make_adamw(g->num_parameters(), {});
  Tensor x = Tensor::zeros({2, 3, 32, 32}), dy = Tensor::zeros({2, 10});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>((i * 7919) % 255) / 255.0f - 0.5f;
  for (int64_t i = 0; i < dy.numel(); ++i) dy.data<float>()[i] = (i % 10 == 3) ? -0.1f : 0.01f;
  for (uint64_t s = 0; s < 3; ++s) {
    const StepContext ctx{true, s, 0};
    g_all = 0, g_large = 0;
    g_counting = s > 0;
    g->zero_grad();
    g->forward(ctx, x);
    g->backward(ctx, dy);
    opt->step(g->params().flat(), g->grads().flat(), 1e-3);
    g_counting = false;
    if (s > 0) {
      EXPECT_EQ(g_large.load(), 0) << "step " << s << ": " << g_large.load() << " large heap allocations";
    }
  }
}

// A small GPT (token ids in, logits over every position out): the attention keeps its tensors
// per shape and its backward buffers in the shared scratch slots.
TEST_P(StepAllocations, GptAllocatesNothingLargeAfterTheFirstStep) {
  if (DP_TEST_UNDER_ASAN) GTEST_SKIP() << "AddressSanitizer owns malloc: the counting allocator is left out";
  ModelConfig mc;
  mc.preset = PresetKind::Gpt2;
  mc.n_layer = 2, mc.n_head = 4, mc.n_embd = 64, mc.block_size = 80, mc.vocab_size = 256, mc.dropout = 0.1;
  auto g = models::build_model(mc, {80}, /*seed=*/3);
  g->set_cpu_backend(GetParam());
  auto opt = optim::make_adamw(g->num_parameters(), {});
  Tensor x = Tensor::zeros({4, 80}, DType::I32), dy = Tensor::zeros({4, 80, 256});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<int32_t>()[i] = static_cast<int32_t>((i * 7919) % 256);
  for (int64_t i = 0; i < dy.numel(); ++i) dy.data<float>()[i] = (i % 256 == 3) ? -0.1f : 0.001f;
  for (uint64_t s = 0; s < 3; ++s) {
    const StepContext ctx{true, s, 0};
    g_all = 0, g_large = 0;
    g_counting = s > 0;
    g->zero_grad();
    g->forward(ctx, x);
    g->backward(ctx, dy);
    opt->step(g->params().flat(), g->grads().flat(), 1e-3);
    g_counting = false;
    if (s > 0) {
      EXPECT_EQ(g_large.load(), 0) << "step " << s << ": " << g_large.load() << " large heap allocations";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, StepAllocations, ::testing::Values(CpuBackend::OneDnn, CpuBackend::Reference),
                         [](const auto& info) { return std::string(enum_name(info.param)); });

}  // namespace
}  // namespace dp
