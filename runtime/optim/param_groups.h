// defines: decay_skip_spans, train.decay_params applied to a model's parameter arena: the spans of
// the flat arena weight decay leaves out (Optimizer::skip_decay), and a line for the log saying
// which parameters decay. nanoGPT's configure_optimizers puts every parameter with dim() >= 2 in
// the decayed group and the rest (biases, LayerNorm and BatchNorm weights) in the group with
// weight_decay 0; "matrices" is that rule, "all" (the default) decays everything.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/arena.h"
#include "runtime/optim/decay_params.h"

namespace dp::optim {

// Sorted, disjoint [begin, end) element spans of `params`' flat layout (adjacent slots merged):
// every slot of one dimension under Matrices; none under All.
std::vector<std::pair<int64_t, int64_t>> decay_skip_spans(const Arena& params, DecayParams rule);

// "weight decay 0.1 on 4 of 6 parameters (41000 values; matrices); none on 2 (264 values): fc1.bias, fc2.bias".
std::string decay_summary(const Arena& params, DecayParams rule, double weight_decay);

}  // namespace dp::optim
