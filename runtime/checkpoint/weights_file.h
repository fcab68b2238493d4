// defines: load_weights, a model's parameters and buffers from a safetensors file of any kind
// people have, and plan_weights_load, the pure matching behind it (names, dtypes, shapes, skip
// patterns). The kinds:
//   a dptrain final.safetensors   (metadata format = "dptrain-weights")
//   a dptrain checkpoint          (format = "dptrain-checkpoint"; its optim.* tensors are not
//                                  weights and are ignored; every CRC is checked)
//   a plain state_dict            (no dptrain metadata: safetensors.torch.save_file(model.state_dict())
//                                  of a torchvision model, whose names dptrain's presets share)
//
// Every tensor of the model must come from the file with the same dtype and shape, and every
// tensor of the file must be one of the model's, except those matching a skip pattern (glob,
// fnmatch(3): "fc.*", "layer4.*.bn?.*"), which stay at their fresh initialisation (a new head for
// fine-tuning) or, in the file, are not used. A tied parameter (Graph::NamedTensor::alias_of:
// GPT's lm_head.weight is transformer.wte.weight) comes from either of its names or both (then
// with equal values); skipping its owner skips it. All problems are found before anything is
// loaded and reported in one UserError, each tensor with what the model expects and what the file
// holds; on error the model is unchanged.
//
// A WeightsTranslator reads a file of another library's naming first (models/ knows them: a
// Hugging Face GPT-2 checkpoint's names without "transformer.", its Conv1D weights stored (in,
// out), its attention-mask buffers): renamed, transposed and ignored tensors, then the rules above.
#pragma once
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/shape.h"
#include "runtime/graph.h"

namespace dp {

enum class WeightsKind { DptrainWeights, DptrainCheckpoint, StateDict };
const char* weights_kind_name(WeightsKind k);  // "dptrain final weights", "dptrain checkpoint", "state_dict"

struct TensorSig {
  std::string name;
  DType dtype;
  Shape shape;
  std::string alias_of;  // model tensors: the owner's name when this is a tied parameter's second name
};

// How a file's tensors map onto the model's names and layouts (empty: as they are).
struct WeightsTranslation {
  std::string kind;                            // for the log, e.g. "Hugging Face GPT-2"; "" = none
  std::map<std::string, std::string> rename;   // file name -> model name
  std::set<std::string> transpose;             // file names of 2-D tensors stored transposed
  std::set<std::string> ignore;                // file names that are not weights (another library's buffers)
};
using WeightsTranslator = std::function<WeightsTranslation(const std::vector<TensorSig>& file)>;
// The file's signatures as the model sees them: ignored ones dropped, renamed, transposed shapes.
std::vector<TensorSig> translate_sigs(const std::vector<TensorSig>& file, const WeightsTranslation& t);

struct WeightsPlan {
  std::vector<std::string> load;      // model tensors the file provides, in model order
  std::vector<std::string> skipped;   // model tensors left fresh (a skip pattern matches)
  std::vector<std::string> unused;    // file tensors not loaded because a skip pattern matches
  // One line per problem, in model order then file order: "'fc.weight': the model has f32[3, 512],
  // the file f32[1000, 512]", "'fc.bias': in the model, not in the file", "'head.w': in the file,
  // not in the model", "skip pattern 'fcc.*' matches no tensor".
  std::vector<std::string> problems;
};
// Pure.
WeightsPlan plan_weights_load(const std::vector<TensorSig>& model, const std::vector<TensorSig>& file,
                              const std::vector<std::string>& skip);

struct WeightsLoad {
  std::string path;
  WeightsKind kind = WeightsKind::StateDict;
  WeightsPlan plan;
  std::string translated;  // the translation's kind ("" = none): for the log
};
// Loads `path` into `model` (any device) as plan_weights_load says. `fix_hint` ends the error
// message (what the caller's user can change, e.g. "model.init_skip = [\"fc.*\"] leaves tensors
// at their fresh initialisation"). Throws UserError naming the file: unreadable, a dptrain
// checkpoint of another format version or with a bad CRC, or problems (at most 20 listed).
// translate (optional): how to read a file of another library's naming (models/weights_import.h).
WeightsLoad load_weights(const std::string& path, Graph& model, const std::vector<std::string>& skip,
                         const std::string& fix_hint, const WeightsTranslator& translate = {});

}  // namespace dp
