// defines: OptimizerKind (train.optimizer), the built-in update rules, and its name table. The
// names are also what Optimizer::name() returns and checkpoints record (runtime/optim/optimizer.h).
#pragma once
#include <span>

#include "runtime/enum_names.h"

namespace dp::optim {

enum class OptimizerKind { Sgd, AdamW };

inline constexpr EnumName<OptimizerKind> kOptimizerKindNames[] = {{OptimizerKind::Sgd, "sgd"},
                                                                  {OptimizerKind::AdamW, "adamw"}};
constexpr std::span<const EnumName<OptimizerKind>> enum_names(OptimizerKind) { return kOptimizerKindNames; }

}  // namespace dp::optim
