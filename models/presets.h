// defines: the built-in models as [[layer]] lists (LayerSpecs), so a preset and a cfg-written
// model take the same road through the registry.
//   mlp            flatten -> (linear, relu)* -> linear
//   cnn            2 x (conv3x3, batchnorm, relu, maxpool2) -> linear 128 -> linear   (Fashion-MNIST)
//   resnet18/50    torchvision's ResNet (v1.5: stride on the 3x3 of a bottleneck), its names
//   cifar_resnet18 ResNet-18 with a 3x3 stride-1 stem and no max-pool (32x32 inputs)
//   gpt2           nanoGPT's GPT (GPT-2) sized by model.n_layer, n_head, n_embd, block_size,
//                  vocab_size, bias: embeddings, pre-LN blocks, ln_f, lm_head tied to wte
#pragma once
#include <vector>

#include "runtime/config.h"

namespace dp::models {

// The layers of preset `cfg.preset` (its names: runtime/preset_kind.h); DpError for
// PresetKind::None, whose model is the cfg's [[layer]] list.
std::vector<LayerSpec> preset_layers(const ModelConfig& cfg);

}  // namespace dp::models
