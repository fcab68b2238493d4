// defines: AttentionGpuCore and choose_attention_gpu_core, which kernel runs the attention core
// (softmax(q k^T / sqrt(D), causal) v and its gradients) of a CausalSelfAttention on the GPU: cuDNN's
// fused scaled-dot-product attention through runtime/cuda/cudnn_graph.h, or the own straightforward
// kernel (attention_kernels.h). Pure; compiled in every build and tested on the host.
#pragma once
#include <cstdint>
#include <string>

#include "base/dtype.h"

namespace dp::models {

enum class AttentionGpuCore { CudnnSdpa, Own };
// "cudnn_sdpa", "own": the word of the layer's debug line (subsystem cudnn) naming the core it runs.
const char* attention_gpu_core_name(AttentionGpuCore c);

// The layer's `sdpa` argument: "auto" takes cuDNN where it can, "own" always the own kernel.
enum class SdpaPreference { Auto, Own };
SdpaPreference parse_sdpa_preference(const std::string& s);  // UserError for another word

struct AttentionGpuChoice {
  AttentionGpuCore core = AttentionGpuCore::Own;
  std::string why;  // for the log: what ruled cuDNN out ("" when it runs)
};

// cuDNN's SDPA runs 16-bit data (bf16, f16) with a head dim that is a multiple of 8 and at most 256
// (runtime/cuda/graph_plan_key.cpp's check_sdpa_key), and its dropout draws another mask than the
// CPU's Philox stream: with attention dropout in training the own kernel runs, so a GPU run drops
// the very elements the CPU run drops. f32 runs the own kernel (cuDNN's fused attention has no f32).
AttentionGpuChoice choose_attention_gpu_core(DType compute, int64_t head_dim, double attn_dropout, bool training,
                                             SdpaPreference pref);

}  // namespace dp::models
