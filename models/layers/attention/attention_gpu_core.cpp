#include "models/layers/attention/attention_gpu_core.h"

#include <fmt/format.h>

#include "base/error.h"

namespace dp::models {

const char* attention_gpu_core_name(AttentionGpuCore c) {
  return c == AttentionGpuCore::CudnnSdpa ? "cudnn_sdpa" : "own";
}

SdpaPreference parse_sdpa_preference(const std::string& s) {
  if (s == "auto") return SdpaPreference::Auto;
  if (s == "own") return SdpaPreference::Own;
  DP_THROW_USER("sdpa = \"{}\": expected \"auto\" (cuDNN's fused attention where it can run, else the own kernel) "
                "or \"own\" (always the own kernel)",
                s);
}

AttentionGpuChoice choose_attention_gpu_core(DType compute, int64_t head_dim, double attn_dropout, bool training,
                                             SdpaPreference pref) {
  if (pref == SdpaPreference::Own) return {AttentionGpuCore::Own, "sdpa = \"own\""};
  if (compute != DType::BF16 && compute != DType::F16)
    return {AttentionGpuCore::Own, fmt::format("{} data (cuDNN's fused attention takes bf16 or f16)", dtype_name(compute))};
  if (head_dim % 8 != 0 || head_dim > 256)
    return {AttentionGpuCore::Own,
            fmt::format("head dim {} (cuDNN's fused attention needs a multiple of 8, at most 256)", head_dim)};
  if (training && attn_dropout > 0)
    return {AttentionGpuCore::Own, "attention dropout in training (the CPU's mask, which cuDNN's dropout does not draw)"};
  return {AttentionGpuCore::CudnnSdpa, ""};
}

}  // namespace dp::models
