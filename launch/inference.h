// defines: run_eval and run_predict, the `dptrain eval` and `dptrain predict` commands: a model
// built from the cfg, its weights from a file (a final.safetensors, a checkpoint, or a
// torchvision-style state_dict: runtime/checkpoint/weights_file.h), then, data-parallel over
// however many ranks the launcher started (--nproc, srun, torchrun's variables):
//   eval     the cfg's evaluation split, each rank its shard, the sums all-reduced: the metrics of
//            one process, printed by rank 0 (and written as JSON with --out);
//   predict  every sample of --input (launch/predict_input.h), rank r taking samples r, r+W, ...,
//            gathered to rank 0, which writes one JSON line per sample in input order:
//              {"input": "<file>", "index": 17, "classes": [3, 5, 0], "probs": [0.91, 0.05, 0.02]}
//            ("index" only for a file holding several samples): the top-k classes by softmax
//            probability, ties to the lower class. The file appears whole or not at all.
// Also softmax_top_k, the pure ranking.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/config.h"

namespace dp::launch {

struct InferenceOptions {
  std::string weights;  // --weights
  std::string input;    // predict: --input
  std::string out;      // eval: optional JSON file; predict: the JSON-lines file
  int64_t topk = 5;     // predict: classes per sample (at most the model's)
};

// Exit status (0) or throws UserError / DpError; every rank calls it.
int run_eval(const Config& cfg, const InferenceOptions& options);
int run_predict(const Config& cfg, const InferenceOptions& options);

// Pure. The k most probable classes of one row of logits (K values): softmax in double, sorted by
// probability, ties to the lower class index; k is clamped to K.
std::vector<std::pair<int64_t, double>> softmax_top_k(const float* logits, int64_t num_classes, int64_t k);

}  // namespace dp::launch
