// defines: with_size_context, which turns an allocation that cannot succeed (HostMemoryError,
// std::bad_alloc) while opening the data or building the model into a UserError naming the cfg
// keys that size it and the machine's limit, and the key lists themselves (pure).
//
// A huge value in a size key (model.num_classes = 1000000000, data.synthetic_shape) used to end
// in "std::bad_alloc" or an internal "check failed": the user could not tell which key.
#pragma once
#include <functional>
#include <string>

#include "runtime/config.h"

namespace dp::launch {

// "model.num_classes = 10, model.hidden = [512, 256]" (a preset) or "the sizes of the [[layer]]
// list (out_channels, out_features, ...)".
std::string model_size_keys(const ModelConfig& m);
// "data.synthetic_shape = [3, 32, 32], data.synthetic_train = 10000, data.synthetic_eval = 1000"
// for synthetic data, else "data.train_limit / data.eval_limit (the data set's files are read
// whole)".
std::string data_size_keys(const DataConfig& d);

// Runs f; an allocation failure inside becomes
//   UserError("<what> needs more memory than this machine has (<detail>); make it smaller: <keys>").
// The GPU's (DeviceOutOfMemory) stays what it is, with <what> added as its context.
void with_size_context(const std::string& what, const std::string& keys, const std::function<void()>& f);

}  // namespace dp::launch
