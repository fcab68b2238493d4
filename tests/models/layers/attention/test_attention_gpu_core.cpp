// models/layers/attention/attention_gpu_core.h: which kernel runs a GPT attention core on the GPU
// (pure, on the host): cuDNN's fused attention only for 16-bit data, head dims it takes, and no
// attention dropout in training; "own" always the own kernel; a bad `sdpa` word is a clear error.
#include <gtest/gtest.h>

#include "base/error.h"
#include "models/layers/attention/attention_gpu_core.h"

namespace dp::models {
namespace {

constexpr auto kAuto = SdpaPreference::Auto;

TEST(AttentionGpuCore, CudnnForSixteenBitDataAndHeadDimsItTakes) {
  for (DType dt : {DType::BF16, DType::F16})
    for (int64_t d : {8, 64, 128, 256}) {
      const AttentionGpuChoice c = choose_attention_gpu_core(dt, d, 0.0, true, kAuto);
      EXPECT_EQ(c.core, AttentionGpuCore::CudnnSdpa) << dtype_name(dt) << " d " << d << ": " << c.why;
      EXPECT_EQ(c.why, "");
    }
}

TEST(AttentionGpuCore, OwnKernelWhereCudnnCannotRunAndSaysWhy) {
  auto own = [](DType dt, int64_t d, double p, bool training) {
    const AttentionGpuChoice c = choose_attention_gpu_core(dt, d, p, training, kAuto);
    EXPECT_EQ(c.core, AttentionGpuCore::Own);
    return c.why;
  };
  EXPECT_EQ(own(DType::F32, 64, 0.0, true), "f32 data (cuDNN's fused attention takes bf16 or f16)");
  EXPECT_EQ(own(DType::BF16, 4, 0.0, true), "head dim 4 (cuDNN's fused attention needs a multiple of 8, at most 256)");
  EXPECT_EQ(own(DType::F16, 264, 0.0, false), "head dim 264 (cuDNN's fused attention needs a multiple of 8, at most 256)");
  EXPECT_EQ(own(DType::BF16, 60, 0.0, true), "head dim 60 (cuDNN's fused attention needs a multiple of 8, at most 256)");
  EXPECT_EQ(own(DType::BF16, 64, 0.1, true),
            "attention dropout in training (the CPU's mask, which cuDNN's dropout does not draw)");
  // Evaluation applies no dropout: cuDNN again.
  EXPECT_EQ(choose_attention_gpu_core(DType::BF16, 64, 0.1, false, kAuto).core, AttentionGpuCore::CudnnSdpa);
  EXPECT_EQ(choose_attention_gpu_core(DType::BF16, 64, 0.0, true, SdpaPreference::Own).why, "sdpa = \"own\"");
}

TEST(AttentionGpuCore, PreferenceWords) {
  EXPECT_EQ(parse_sdpa_preference("auto"), SdpaPreference::Auto);
  EXPECT_EQ(parse_sdpa_preference("own"), SdpaPreference::Own);
  try {
    parse_sdpa_preference("cudnn");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "sdpa = \"cudnn\": expected \"auto\" (cuDNN's fused attention where it can run, else the "
                           "own kernel) or \"own\" (always the own kernel)");
  }
  EXPECT_STREQ(attention_gpu_core_name(AttentionGpuCore::CudnnSdpa), "cudnn_sdpa");
  EXPECT_STREQ(attention_gpu_core_name(AttentionGpuCore::Own), "own");
}

}  // namespace
}  // namespace dp::models
