// defines: gpu_count_from_a_child and SKIP_WITHOUT_GPU_IN_CHILD, the GPU check of the
// collectives tests. They fork (ringtest::run_ranks), and a CUDA context does not survive a
// fork: so the test process itself never touches CUDA (tests/kernels/cuda_test_util.h's
// SKIP_WITHOUT_GPU would initialise it); devices are counted in a child, and every GPU test
// body runs in forked ranks.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "runtime/device_memory.h"

namespace dp::testing_gpu {

inline int gpu_count_from_a_child() {
  static const int n = [] {
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) _exit(std::min(cuda_device_count(), 100));
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 0;
  }();
  return n;
}

}  // namespace dp::testing_gpu

#define SKIP_WITHOUT_GPU_IN_CHILD() \
  if (::dp::testing_gpu::gpu_count_from_a_child() == 0) GTEST_SKIP() << "no GPU"
