#include "models/layers/batchnorm2d/batchnorm2d_ex_guard.h"

#include <fmt/format.h>

namespace dp::models {

BnExChoice bn_ex_choice(DType dtype, bool nhwc, int64_t C, Epilogue epi, bool training, bool synced) {
  BnExChoice c;
  if (!training) {
    c.reason = "eval normalises with the running statistics (cuDNN's inference call has no persistent form)";
  } else if (synced) {
    c.reason = "SyncBN computes its global statistics with dptrain's kernels";
  } else if (!nhwc) {
    c.reason = "the persistent kernels take NHWC (channels-last) data; this layer's is NCHW";
  } else if (dtype != DType::F16 && dtype != DType::BF16) {
    c.reason = fmt::format("the persistent NHWC kernels are for 16-bit data, not {}", dtype_name(dtype));
  } else {
    c.use = true;
    if (epi != Epilogue::None && C % 4 != 0) {
      c.own_epilogue = true;
      c.reason = fmt::format("C = {} is not a multiple of 4, which cuDNN's fused activation needs: the {} runs as "
                             "dptrain's kernel after it",
                             C, epilogue_name(epi));
    } else {
      c.ops = epi == Epilogue::Relu      ? BnExOps::BnActivation
              : epi == Epilogue::AddRelu ? BnExOps::BnAddActivation
                                         : BnExOps::Bn;
    }
  }
  return c;
}

}  // namespace dp::models
