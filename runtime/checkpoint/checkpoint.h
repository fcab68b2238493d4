// defines: the dptrain checkpoint format (CheckpointMeta, write_checkpoint in checkpoint_write.cpp,
// load_checkpoint in checkpoint_load.cpp) and its checks (read_checkpoint_meta, check_crcs), shared by the trainer and tools/.
//
// A checkpoint is one safetensors file (runtime/checkpoint/safetensors.h), so PyTorch and numpy read it
// as is:
//   tensors   the model's parameters and buffers under their state names (Graph::state(),
//             torchvision-style: "conv1.weight", "bn1.running_mean"), then the optimizer
//             state sliced per parameter: "optim.<param>.<slot>" with the parameter's shape
//             ("optim.conv1.weight.exp_avg"); wider dtypes first, so every tensor is aligned
//             to its element size.
//   metadata  (all strings, as safetensors wants)
//     format          "dptrain-checkpoint"
//     format_version  "1"; readers refuse other versions and say what to do
//     step            optimizer steps done (the LR schedule position)
//     epoch           epoch in progress (0-based)
//     epoch_samples   samples of that epoch's order consumed by all ranks together
//     seed, world_size, batch_size (per rank), dtype_policy
//     global_batch    only where a resume at another world size re-planned the batch
//                     (train.elastic_batch = "global", launch/elastic_batch.h): the global batch
//                     the run keeps; absent: world_size x batch_size x the cfg's accum_steps
//     sampler         JSON: dataset_size, shuffle, drop_last
//     rng             how random numbers are derived (keyed Philox: nothing to save but seed/step)
//     optimizer       "sgd" | "adamw"; optimizer_steps: its step count
//     config          the resolved config (to_toml)
//     crc32c          JSON {"<tensor>": "<8 hex digits>"}: CRC-32C of each tensor's raw bytes
//     crc32c_metadata CRC-32C of every other metadata entry (metadata_crc): a value edited in
//                     place (a step, a sampler position) is an error, and resume falls back to
//                     an earlier checkpoint. Files of older writers lack it and are read as before.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/graph.h"
#include "runtime/optim/optimizer.h"
#include "runtime/checkpoint/safetensors.h"

namespace dp {

inline constexpr const char* kCheckpointFormat = "dptrain-checkpoint";
inline constexpr int kCheckpointVersion = 1;
inline constexpr const char* kOptimPrefix = "optim.";

struct CheckpointMeta {
  int64_t step = 0;           // optimizer steps done
  int64_t epoch = 0;          // epoch in progress, 0-based
  int64_t epoch_samples = 0;  // samples of `epoch` consumed, all ranks together
  uint64_t seed = 0;
  int64_t world_size = 1;
  int64_t batch_size = 0;     // per rank
  int64_t global_batch = 0;   // the re-planned global batch (0: not re-planned, see above)
  int64_t dataset_size = 0;   // training samples per epoch before sharding
  bool shuffle = true, drop_last = false;
  std::string dtype_policy = "params f32, optimizer state f32, compute fp32";
  std::string optimizer;
  int64_t optimizer_steps = 0;
  std::string config;         // resolved config (TOML)
  std::string classes = "[]"; // the data's class names in label order (JSON list)

  std::map<std::string, std::string> to_metadata() const;  // without crc32c
};

// The tensors a checkpoint of (model, opt) holds, in file order (see above). Views of the live
// state: write them before the next step.
std::vector<std::pair<std::string, Tensor>> checkpoint_tensors(const Graph& model, const optim::Optimizer& opt);

// One tensor of a checkpoint file: a model tensor (`model`, a view of Graph::state()'s), or the
// optimizer's state "optim.<param>.<slot>": slot `slot` of Optimizer::state() over the arena's
// elements [offset, + numel of shape).
struct CheckpointEntry {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  Tensor model;        // undefined for the optimizer's state
  int slot = -1;       // the optimizer's: its index in Optimizer::state()
  int64_t offset = 0;  // the optimizer's: the parameter's first element in the arena
};
// The file's tensors in file order (see above) for `model` and an optimizer whose state() has
// `slots` (name and dtype each, in state() order): what checkpoint_tensors views, without the state.
std::vector<CheckpointEntry> checkpoint_layout(const Graph& model,
                                               const std::vector<std::pair<std::string, DType>>& slots);
// The (name, dtype) of each of opt.state()'s tensors.
std::vector<std::pair<std::string, DType>> state_slots(const optim::Optimizer& opt);

// Where slot `slot`'s state over the arena's elements [begin, begin + len) goes in a file of
// `layout`: for each "optim.<param>.<slot>" it meets, in layout order, the entry, the first of its
// elements met, the same element's index in the span, and how many (pure).
struct StatePart {
  size_t entry = 0;
  int64_t tensor_begin = 0, span_begin = 0, len = 0;
};
std::vector<StatePart> state_parts(const std::vector<CheckpointEntry>& layout, int slot, int64_t begin, int64_t len);

// A checkpoint written as its bytes arrive, the same bytes write_checkpoint writes for the same
// state: ZeRO's save, where the optimizer's state reaches the writer a bucket at a time from every
// rank and is never whole in its memory (collectives/reducer/zero_shard.h stream_state). Each
// tensor's bytes must arrive in order; tensors may arrive in any order. commit() (every tensor
// complete) puts their CRC-32Cs into the metadata and renames the file into place as
// write_safetensors does; destroyed uncommitted, the temporary file is removed.
// after_tensor(k, n): called as the k-th of n tensors completes (write_safetensors').
class CheckpointStream {
 public:
  CheckpointStream(const std::string& path, std::vector<CheckpointEntry> layout, const CheckpointMeta& meta,
                   std::function<void(size_t, size_t)> after_tensor = {});
  const std::vector<CheckpointEntry>& layout() const { return layout_; }
  // The next `bytes` of tensor i's data.
  void append(size_t i, const void* data, size_t bytes);
  // Every model tensor, whole (CPU or device).
  void append_model();
  // Slot `slot`'s state over the arena's elements [begin, begin + len) (f32): of every
  // "optim.<param>.<slot>" tensor the part it covers (checkpoint.h state_copies).
  void append_state(int slot, int64_t begin, const float* data, int64_t len);
  void commit();

 private:
  void completed();  // one more tensor complete: after_tensor
  std::vector<CheckpointEntry> layout_;
  CheckpointMeta meta_;
  std::function<void(size_t, size_t)> after_tensor_;
  std::vector<size_t> written_;  // bytes of each tensor so far
  std::vector<uint32_t> crc_;    // their CRC-32C so far
  size_t complete_ = 0;
  SafetensorsWriter out_;
};

// Writes a checkpoint atomically (write_safetensors: tmp, fsync, rename, fsync dir).
void write_checkpoint(const std::string& path, const Graph& model, const optim::Optimizer& opt,
                      const CheckpointMeta& meta);
// The same file from `tensors` (checkpoint_tensors' list, or a host copy of it: a
// CheckpointSnapshot), so a snapshot written later is byte for byte what write_checkpoint writes
// at the step it was taken. after_tensor: write_safetensors'.
void write_checkpoint_tensors(const std::string& path, std::vector<std::pair<std::string, Tensor>> tensors,
                              const CheckpointMeta& meta, const std::function<void(size_t, size_t)>& after_tensor = {});

// Checks `path` completely, then restores it into `model` and `opt`: format and version,
// every name, dtype and shape against the model and the optimizer (the first mismatch is
// named), every CRC. Throws UserError naming the file and the tensor; on error nothing is
// changed, so the caller may try another checkpoint.
// pieces: the elements of the flat parameter arena whose state `opt` holds (opt.numel() = their
// total), as ZeRO's shard optimizer holds a rank's pieces (collectives/reducer/zero_shard.h);
// empty: the whole arena. Both passes (the CRCs, then the restore) read one tensor at a time and
// copy only those elements, so the load's transient host memory is the file's largest tensor.
CheckpointMeta load_checkpoint(const std::string& path, Graph& model, optim::Optimizer& opt,
                               const std::vector<optim::ArenaPiece>& pieces = {});

// One copy of a load's optimizer state: elements [tensor_begin, + len) of a parameter's
// "optim.<param>.<state>" tensor (flattened) go to [state_begin, + len) of the optimizer's state.
struct StateCopy {
  int64_t tensor_begin = 0, state_begin = 0, len = 0;
};
// The copies for the parameter at [slot_offset, + slot_numel) of the arena: its intersection with
// each of `pieces` that it meets, in pieces' order (pure).
std::vector<StateCopy> state_copies(int64_t slot_offset, int64_t slot_numel,
                                    const std::vector<optim::ArenaPiece>& pieces);

// Format and version check plus the metadata fields (UserError naming the file otherwise).
CheckpointMeta read_checkpoint_meta(const SafetensorsFile& f);

inline constexpr const char* kMetadataCrcKey = "crc32c_metadata";
// CRC-32C over "key\0value\0" of every entry but kMetadataCrcKey, in key order.
uint32_t metadata_crc(const std::map<std::string, std::string>& metadata);

// "1a2b3c4d"
std::string crc_hex(uint32_t crc);
// The file's crc32c map ({"name": "8 hex digits"}; empty when absent). UserError when malformed.
std::map<std::string, uint32_t> stored_crcs(const SafetensorsFile& f);
// The CRC-32C of a CPU tensor's bytes.
uint32_t tensor_crc(const Tensor& t);

struct TensorCrc {
  std::string name;
  bool stored = false;     // the file's crc32c map has this tensor
  uint32_t expected = 0;   // stored value
  uint32_t actual = 0;     // recomputed from the bytes
  bool ok() const { return stored && expected == actual; }
};
// Reads every tensor of `f` and checks it against the `crc32c` metadata (if any), in file
// order. A malformed crc32c map is a UserError; a tensor missing from the map has stored = false.
std::vector<TensorCrc> check_crcs(const SafetensorsFile& f);

}  // namespace dp
