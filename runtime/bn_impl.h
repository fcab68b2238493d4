// defines: BnImpl (train.bn_impl), which implementation a BatchNorm2d's GPU path trains with, and
// its name table. The GPU plan (runtime/fusion_plan.h: a ReLU, or a residual add and a ReLU, folded
// into the batch norm) is the same whichever runs; each applies the fused epilogue itself.
//
// Cudnn: cuDNN's legacy spatial batch norm (cudnnBatchNormalizationForwardTraining / Backward;
// the fused epilogue is an own elementwise kernel after cuDNN's forward and before its backward).
// Own: dptrain's kernels (models/layers/batchnorm2d/batchnorm2d_reduce.h, _apply.h): one-pass
// Welford statistics with f32 accumulation, 16-byte loads, channels last as the main case, the
// epilogue fused into the normalisation. CudnnEx: cuDNN's persistent NHWC batch norm
// (cudnnBatchNormalizationForwardTrainingEx / BackwardEx, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, the
// epilogue through its bnOps; deprecated in cuDNN 9's headers) where its guard
// (batchnorm2d_ex_guard.h) allows it, Cudnn elsewhere. Eval (running statistics) and SyncBN are the
// same for all three except that eval under Own normalises with the own kernels. A new
// implementation is one more value here and one file in models/layers/batchnorm2d/.
#pragma once
#include <span>

#include "runtime/enum_names.h"

namespace dp {

enum class BnImpl { Cudnn, Own, CudnnEx };

inline constexpr EnumName<BnImpl> kBnImplNames[] = {
    {BnImpl::Cudnn, "cudnn"}, {BnImpl::Own, "own"}, {BnImpl::CudnnEx, "cudnn_ex"}};
constexpr std::span<const EnumName<BnImpl>> enum_names(BnImpl) { return kBnImplNames; }

}  // namespace dp
