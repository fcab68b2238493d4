// BatchNorm2d's choice of GPU path (bn_gpu_path) over train.bn_impl, and the guard of cuDNN's
// persistent batch norm (bn_ex_choice): the running statistics in eval whatever else holds, SyncBN's
// own global statistics, each bn_impl where it applies and its fallbacks. Pure; runs without a GPU.
#include <gtest/gtest.h>

#include "models/layers/batchnorm2d/batchnorm2d.h"
#include "models/layers/batchnorm2d/batchnorm2d_ex_guard.h"

namespace dp::models {
namespace {

TEST(BnGpuPath, EachImplTrainsWhereItAppliesAndFallsBackElsewhere) {
  for (BnImpl impl : {BnImpl::Cudnn, BnImpl::Own, BnImpl::CudnnEx})
    for (bool ex : {false, true})
      for (bool refused : {false, true}) {
        SCOPED_TRACE(testing::Message() << enum_name(impl) << (ex ? " ex allowed" : "") << (refused ? " refused" : ""));
        for (bool synced : {false, true}) EXPECT_EQ(bn_gpu_path(false, synced, impl, ex, refused), BnGpuPath::RunningStats);
        EXPECT_EQ(bn_gpu_path(true, true, impl, ex, refused), BnGpuPath::OwnSync);
      }
  for (bool ex : {false, true})
    for (bool refused : {false, true}) EXPECT_EQ(bn_gpu_path(true, false, BnImpl::Own, ex, refused), BnGpuPath::Own);
  EXPECT_EQ(bn_gpu_path(true, false, BnImpl::Cudnn, false, false), BnGpuPath::Cudnn);
  EXPECT_EQ(bn_gpu_path(true, false, BnImpl::Cudnn, true, false), BnGpuPath::Cudnn);  // ex_allowed alone is no request
  EXPECT_EQ(bn_gpu_path(true, false, BnImpl::Cudnn, false, true), BnGpuPath::Own);
  EXPECT_EQ(bn_gpu_path(true, false, BnImpl::CudnnEx, true, false), BnGpuPath::CudnnEx);
  EXPECT_EQ(bn_gpu_path(true, false, BnImpl::CudnnEx, true, true), BnGpuPath::CudnnEx);
  EXPECT_EQ(bn_gpu_path(true, false, BnImpl::CudnnEx, false, false), BnGpuPath::Cudnn);
  EXPECT_EQ(bn_gpu_path(true, false, BnImpl::CudnnEx, false, true), BnGpuPath::Own);
}

TEST(BnExGuard, SixteenBitChannelsLastTrainingTakesThePersistentCallWithTheEpilogueFused) {
  for (DType dt : {DType::BF16, DType::F16}) {
    BnExChoice c = bn_ex_choice(dt, true, 64, Epilogue::None, true, false);
    EXPECT_TRUE(c.use);
    EXPECT_EQ(c.ops, BnExOps::Bn);
    EXPECT_FALSE(c.own_epilogue);
    EXPECT_EQ(c.reason, "");
    c = bn_ex_choice(dt, true, 64, Epilogue::Relu, true, false);
    EXPECT_TRUE(c.use);
    EXPECT_EQ(c.ops, BnExOps::BnActivation);
    EXPECT_FALSE(c.own_epilogue);
    c = bn_ex_choice(dt, true, 2048, Epilogue::AddRelu, true, false);
    EXPECT_TRUE(c.use);
    EXPECT_EQ(c.ops, BnExOps::BnAddActivation);
    EXPECT_FALSE(c.own_epilogue);
    // Without a fused activation C may be anything.
    EXPECT_TRUE(bn_ex_choice(dt, true, 3, Epilogue::None, true, false).use);
  }
}

TEST(BnExGuard, CNotAMultipleOfFourKeepsThePersistentCallWithOurEpilogue) {
  for (Epilogue e : {Epilogue::Relu, Epilogue::AddRelu}) {
    const BnExChoice c = bn_ex_choice(DType::BF16, true, 6, e, true, false);
    EXPECT_TRUE(c.use);
    EXPECT_EQ(c.ops, BnExOps::Bn);
    EXPECT_TRUE(c.own_epilogue);
    EXPECT_EQ(c.reason, std::string("C = 6 is not a multiple of 4, which cuDNN's fused activation needs: the ") +
                            epilogue_name(e) + " runs as dptrain's kernel after it");
  }
}

TEST(BnExGuard, EverythingElseTakesTheOtherPathsWithAReason) {
  const BnExChoice eval = bn_ex_choice(DType::BF16, true, 64, Epilogue::Relu, false, false);
  EXPECT_FALSE(eval.use);
  EXPECT_EQ(eval.reason, "eval normalises with the running statistics (cuDNN's inference call has no persistent form)");
  const BnExChoice sync = bn_ex_choice(DType::BF16, true, 64, Epilogue::None, true, true);
  EXPECT_FALSE(sync.use);
  EXPECT_EQ(sync.reason, "SyncBN computes its global statistics with dptrain's kernels");
  const BnExChoice nchw = bn_ex_choice(DType::F16, false, 64, Epilogue::None, true, false);
  EXPECT_FALSE(nchw.use);
  EXPECT_EQ(nchw.reason, "the persistent kernels take NHWC (channels-last) data; this layer's is NCHW");
  const BnExChoice f32 = bn_ex_choice(DType::F32, true, 64, Epilogue::None, true, false);
  EXPECT_FALSE(f32.use);
  EXPECT_EQ(f32.reason, "the persistent NHWC kernels are for 16-bit data, not f32");
}

}  // namespace
}  // namespace dp::models
