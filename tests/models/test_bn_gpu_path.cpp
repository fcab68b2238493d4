// BatchNorm2d's choice of GPU path (bn_gpu_path): cuDNN for plain training, our kernels for
// SyncBN and wherever cuDNN refused, running statistics in eval whatever else holds. Pure; runs
// without a GPU.
#include <gtest/gtest.h>

#include "models/layers/batchnorm2d/batchnorm2d.h"

namespace dp::models {
namespace {

TEST(BnGpuPath, CudnnTrainsOwnKernelsSyncAndStandInRunningStatsInEval) {
  EXPECT_EQ(bn_gpu_path(true, false, false), BnGpuPath::CudnnBatchStats);
  EXPECT_EQ(bn_gpu_path(true, true, false), BnGpuPath::OwnBatchStats);
  EXPECT_EQ(bn_gpu_path(true, false, true), BnGpuPath::OwnBatchStats);
  EXPECT_EQ(bn_gpu_path(true, true, true), BnGpuPath::OwnBatchStats);
  for (bool synced : {false, true})
    for (bool refused : {false, true}) EXPECT_EQ(bn_gpu_path(false, synced, refused), BnGpuPath::RunningStats);
}

}  // namespace
}  // namespace dp::models
