// defines: DecayParams (train.decay_params), which parameters weight decay applies to, and its
// name table. All: every parameter (torch.optim's default, this project's behaviour before the key
// existed). Matrices: nanoGPT's rule (configure_optimizers): every parameter of two or more
// dimensions (weights of linear and convolution layers, embeddings) decays, none of one dimension
// (biases, LayerNorm and BatchNorm weights and biases).
#pragma once
#include <span>

#include "runtime/enum_names.h"

namespace dp::optim {

enum class DecayParams { All, Matrices };

inline constexpr EnumName<DecayParams> kDecayParamsNames[] = {{DecayParams::All, "all"},
                                                              {DecayParams::Matrices, "matrices"}};
constexpr std::span<const EnumName<DecayParams>> enum_names(DecayParams) { return kDecayParamsNames; }

}  // namespace dp::optim
