// defines: weights_translator, how model.init and --weights read a checkpoint named by another
// library for a cfg's model (runtime/checkpoint/weights_file.h applies it): for the gpt2 preset a
// Hugging Face GPT-2 checkpoint (GPT2LMHeadModel or GPT2Model saved as safetensors) or a nanoGPT
// state_dict with its attention-mask buffers; no translation for the other models.
#pragma once
#include <vector>

#include "runtime/checkpoint/weights_file.h"
#include "runtime/config.h"

namespace dp::models {

WeightsTranslator weights_translator(const ModelConfig& m);

// Pure. A GPT checkpoint's tensors as nanoGPT names them: names without "transformer." (GPT2Model)
// get it (lm_head.weight stays); the attention-mask buffers "h.<i>.attn.bias" and
// "h.<i>.attn.masked_bias" (Hugging Face; nanoGPT without flash attention) are ignored; and when
// c_attn.weight is stored (C, 3C), the file holds Hugging Face's Conv1D weights (y = x W + b,
// W (in, out)): attn.c_attn, attn.c_proj, mlp.c_fc and mlp.c_proj weights are transposed into
// nn.Linear's (out, in). lm_head absent means tied (the model's lm_head.weight is
// transformer.wte.weight). A file without a wte.weight is not a GPT checkpoint: no translation.
WeightsTranslation gpt2_translation(const std::vector<TensorSig>& file);

}  // namespace dp::models
