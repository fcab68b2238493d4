// defines: DP_SKIP_WITHOUT_MKL, which skips a test (saying why and how to get MKL) where this process
// could not load MKL from DPTRAIN_MKL_DIR (runtime/cpu_gemm_choice.h): the MKL tests run where
// tools/setup.sh fetched it and skip in a CI job without it, as the GPU tests skip without a GPU.
#pragma once
#include <gtest/gtest.h>

#include "runtime/cpu_gemm_choice.h"

#define DP_SKIP_WITHOUT_MKL()                                                                                  \
  do {                                                                                                         \
    if (!::dp::process_mkl().loaded)                                                                           \
      GTEST_SKIP() << "MKL not present (" << ::dp::process_mkl().error                                        \
                   << "); tools/setup.sh fetches it, DPTRAIN_MKL_DIR says where it is";                      \
  } while (0)
