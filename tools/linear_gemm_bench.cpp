// linear_gemm_bench: the linear layers' three products (forward, backward data, weight gradient:
// kernels/cpu/onednn_matmul.h's LinearMatmul) per shape on each GEMM library of train.cpu_gemm,
// for the measured rule of runtime/cpu_backend.h's resolved_cpu_gemm (docs/cpu-performance.md).
//
//   linear_gemm_bench [M] [reps]     (M: rows, default 4096 = nanoGPT shakespeare-char's 16 x 256)
//
// Shapes: the gpt2 preset at 384 dims, vocabulary 65 (c_attn, attn c_proj, c_fc, mlp c_proj,
// lm_head). The libraries take turns within every repetition (A B C A B C ...), so a change in the
// machine's load hits all of them; each cell is the fastest repetition, in ms (at 1 thread the
// thread's CPU time, which a shared machine's other processes do not inflate), and its GFLOP/s.
// MKL from DPTRAIN_MKL_DIR (left out, saying so, where it is absent). Threads: OMP_NUM_THREADS.
#include <omp.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/rng.h"
#include "kernels/cpu/cpu_env.h"
#include "kernels/cpu/onednn_matmul.h"
#include "runtime/cpu_gemm_choice.h"

namespace {

using namespace dp;
namespace dn = kernels::cpu::onednn;

struct Shape {
  const char* name;
  int64_t in, out;
};

std::vector<float> random_floats(int64_t n, uint64_t seed) {
  Rng rng(seed, 0);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<float>(rng.normal()) * 0.1f;
  return v;
}

// The calling thread's CPU time (ms) of fn: at 1 thread (OMP_NUM_THREADS=1) every library runs on
// the calling thread, and CPU time does not count the time other processes on a shared machine
// take the core away (wall time there measures the load). With more threads: wall time.
double ms_of(auto&& fn) {
  const bool one = omp_get_max_threads() == 1;
  timespec a{}, b{};
  const auto t0 = std::chrono::steady_clock::now();
  if (one) clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
  fn();
  if (one) {
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    return (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) * 1e-6;
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

int run(int64_t M, int reps) {
  const Shape shapes[] = {{"c_attn", 384, 1152}, {"attn.c_proj", 384, 384}, {"mlp.c_fc", 384, 1536},
                          {"mlp.c_proj", 1536, 384}, {"lm_head", 384, 65}};
  std::vector<std::pair<const char*, dn::GemmLibrary>> libs = {{"onednn", dn::GemmLibrary::Onednn},
                                                               {"openblas", dn::GemmLibrary::Openblas}};
  if (process_mkl().loaded) libs.push_back({"mkl", dn::GemmLibrary::Mkl});
  else std::fprintf(stderr, "linear_gemm_bench: MKL left out (%s)\n", process_mkl().error.c_str());
  std::printf("| product | M x N x K | %s |\n|---|---|",
              libs.size() == 3 ? "oneDNN | OpenBLAS | MKL" : "oneDNN | OpenBLAS");
  for (size_t i = 0; i < libs.size(); ++i) std::printf("---|");
  std::printf("\n");
  for (const Shape& s : shapes) {
    dn::LinearMatmul mm("bench", s.in, s.out, true);
    const auto x = random_floats(M * s.in, 1), w = random_floats(s.out * s.in, 2), b = random_floats(s.out, 3);
    const auto dy = random_floats(M * s.out, 4);
    std::vector<float> y(static_cast<size_t>(M * s.out)), dx(static_cast<size_t>(M * s.in));
    std::vector<float> dw(static_cast<size_t>(s.out * s.in)), db(static_cast<size_t>(s.out));
    // best[product][lib]
    std::vector<std::vector<double>> best(3, std::vector<double>(libs.size(), 1e30));
    for (int r = 0; r < reps + 1; ++r)  // the first repetition warms up (primitives, MKL's buffers)
      for (size_t l = 0; l < libs.size(); ++l) {
        const dn::GemmLibrary lib = libs[l].second;
        const double f = ms_of([&] { mm.forward(lib, y.data(), x.data(), w.data(), b.data(), M); });
        const double d = ms_of([&] { mm.backward_data(lib, dx.data(), dy.data(), w.data(), M); });
        const double g = ms_of([&] { mm.backward_weights(lib, dw.data(), nullptr, dy.data(), x.data(), M); });
        if (r == 0) continue;
        best[0][l] = std::min(best[0][l], f);
        best[1][l] = std::min(best[1][l], d);
        best[2][l] = std::min(best[2][l], g);
      }
    const char* what[] = {"forward", "backward data", "weight gradient"};
    const int64_t mnk[3][3] = {{M, s.out, s.in}, {M, s.in, s.out}, {s.out, s.in, M}};
    const double flops = 2.0 * static_cast<double>(M * s.in * s.out);
    for (int p = 0; p < 3; ++p) {
      std::printf("| %s %s | %lld x %lld x %lld |", s.name, what[p], static_cast<long long>(mnk[p][0]),
                  static_cast<long long>(mnk[p][1]), static_cast<long long>(mnk[p][2]));
      for (size_t l = 0; l < libs.size(); ++l)
        std::printf(" %.2f ms (%.0f) |", best[p][l], flops / (best[p][l] / 1000.0) / 1e9);
      std::printf("\n");
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  dp::kernels::cpu::ensure_cpu_env(argv);  // as gpt_step_bench: OpenBLAS's kernels for this CPU
  const int64_t M = argc > 1 ? std::atoll(argv[1]) : 4096;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  try {
    return run(M, reps);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "linear_gemm_bench: %s\n", e.what());
    return 1;
  }
}
