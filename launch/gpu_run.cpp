#include "launch/gpu_run.h"

#include "base/error.h"

namespace dp::launch {

DType compute_dtype_of(Precision precision) {
  switch (precision) {
    case Precision::Fp32: return DType::F32;
    case Precision::Bf16: return DType::BF16;
    case Precision::Fp16: return DType::F16;
  }
  DP_CHECK(false, "train.precision {} is not handled", static_cast<int>(precision));
  return DType::F32;
}

}  // namespace dp::launch
