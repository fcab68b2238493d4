// defines: bn_ex_choice, the guard of cuDNN's persistent NHWC batch norm (train.bn_impl =
// "cudnn_ex": cudnnBatchNormalizationForwardTrainingEx / BackwardEx in
// CUDNN_BATCHNORM_SPATIAL_PERSISTENT mode): whether a BatchNorm2d step may take it, with which
// bnOps, and why not. Pure; tested on the host.
//
// What cuDNN documents for these calls (cuDNN 9's API reference; the functions are marked
// deprecated in cuDNN 9.19's cudnn_ops.h and stay until a GPU run shows whether they win):
//   - training only (the inference call has no Ex form); 4-D (and 5-D) tensors;
//   - the fast semi-persistent NHWC kernels need every tensor (x, y, z, dy, dx, dz) fully packed
//     NHWC, 16-bit (the documentation names CUDNN_DATA_HALF; bf16 is tried and a
//     CUDNN_STATUS_NOT_SUPPORTED answer falls back, logged, to the legacy call), the
//     SPATIAL_PERSISTENT mode, and a workspace and reserve space at least the sizes
//     cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize /
//     cudnnGetBatchNormalizationTrainingExReserveSpaceSize /
//     cudnnGetBatchNormalizationBackwardExWorkspaceSize return;
//   - the fused activation ops (CUDNN_BATCHNORM_OPS_BN_ACTIVATION, _BN_ADD_ACTIVATION, with a
//     ReLU activation descriptor) need C to be a multiple of 4; plain CUDNN_BATCHNORM_OPS_BN
//     does not (since cuDNN 8.2).
// Where the fused ops are ruled out but the rest holds, the Ex call runs with OPS_BN and the
// epilogue is our elementwise kernel, as under the legacy path. Everything else (NCHW, f32, eval,
// SyncBN) takes the layer's other paths; the reason is logged once per layer.
#pragma once
#include <cstdint>
#include <string>

#include "base/dtype.h"
#include "runtime/epilogue.h"

namespace dp::models {

enum class BnExOps { Bn, BnActivation, BnAddActivation };  // cudnnBatchNormOps_t's three

struct BnExChoice {
  bool use = false;           // the Ex call runs this step (else the layer's other paths)
  BnExOps ops = BnExOps::Bn;  // what it fuses
  bool own_epilogue = false;  // an epilogue cuDNN does not fuse here: our kernel applies it
  std::string reason;         // why not used, or why the epilogue is ours; empty when all is cuDNN's
};

// dtype: the activations'; nhwc: stored channels last (4-D); C: channels; epi: the GPU plan's
// epilogue; training: ctx.training; synced: SyncBN reduces this step.
BnExChoice bn_ex_choice(DType dtype, bool nhwc, int64_t C, Epilogue epi, bool training, bool synced);

}  // namespace dp::models
