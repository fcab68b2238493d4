// defines: memory_command, what `dptrain memory model.cfg` does: the cfg read and checked as
// training reads it (load_config, validate_model, the model built on the CPU with training's
// size errors), then the planned per-rank peak of its training step (launch/memory_estimate.h) as
// a table or JSON, or with --max-batch the largest batch whose plan fits the device's memory.
// Touches no device, except to read a GPU's memory size for --max-batch without --device-memory.
#pragma once
#include <string>
#include <vector>

#include "runtime/config.h"
#include "runtime/tensor.h"

namespace CLI {
class App;
}

namespace dp::launch {

struct MemoryArgs {
  std::string cfg_path;
  std::vector<std::string> sets;  // --set section.key=value
  int world = 1;                  // --world N: ranks (the optimizer state's shards under train.zero)
  bool json = false;
  bool max_batch = false;
  std::string device_memory;      // --device-memory 80GiB (default: the device's own)
};

// `dptrain memory`'s options, on `app`.
CLI::App* add_memory_command(CLI::App& app, MemoryArgs& a);

// The per-sample input shape the model is built for: the cfg's own for synthetic data, token
// windows and the fixed image sets (Fashion-MNIST, CIFAR-10, image folders and tar shards at
// data.image_size); other kinds open the data set (as --check does). Throws UserError as they do.
Shape planned_sample_shape(const Config& cfg);

// Prints the report on stdout; 0, or UserError (exit 2) for a bad cfg or a model that does not
// fit at batch 1 under --max-batch (naming the largest category).
int memory_command(MemoryArgs a);

}  // namespace dp::launch
