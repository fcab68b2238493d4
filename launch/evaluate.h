// defines: EvalResult, count_hits and evaluate, the distributed evaluation: each rank evaluates
// its shard of the split and the sums are all-reduced, giving exactly one process's metric; and
// forward_in_eval_mode, the loop over a shard it shares with `dptrain predict`.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "collectives/communicator.h"
#include "launch/batch_feed.h"
#include "launch/datasets.h"
#include "models/layers/softmax_cross_entropy/softmax_cross_entropy.h"
#include "runtime/config.h"
#include "runtime/graph.h"

namespace dp::launch {

class GpuRun;

// loss, top1 and top5 are means over the scored positions: the samples, or for token windows
// every position of every window (loss: mean cross-entropy in nats per token; top1: token accuracy).
struct EvalResult {
  double loss = 0, top1 = 0, top5 = 0;
  int64_t samples = 0;    // samples (token windows: windows)
  int64_t positions = 0;  // scored rows: samples, or samples x T for token windows
  bool tokens = false;    // token windows
  double ppl() const;     // exp(loss): perplexity
};

// The scores and labels of a batch as rows: logits (N, K) and labels (N) as they are; a language
// model's logits (N, T, K) as (N T, K) and its targets (N, T) as (N T): the loss and the hits over
// every position (views, no copy).
Tensor score_rows(const Tensor& logits);
Tensor label_rows(const Tensor& labels);

// Adds one batch's top-1 and top-5 hits: logits (N, K) f32 on the CPU, labels (N) i32. The
// true class's rank is the number of classes scoring strictly higher (ties count for it).
// classes: the first columns of each row that are classes when the rows are padded
// (models::output_width), 0: every column.
void count_hits(const Tensor& logits, const Tensor& labels, int64_t& top1, int64_t& top5, int64_t classes = 0);

// Rank r evaluates samples r, r+W, ... of the split (no padding, so no sample counts twice) in
// eval mode; loss sums, hit counts and sample and position counts are all-reduced, so the result
// is one process's. Every rank calls it. gpu: the run's GPU side when the model is on a GPU (the
// batches go through a DeviceInput; the loss and the hits are computed there), else null.
// workers: the loader's threads.
EvalResult evaluate(Graph& model, models::SoftmaxCrossEntropy& loss, const DataSplit& split, const Config& cfg,
                    uint64_t step, Communicator& comm, GpuRun* gpu = nullptr, int workers = 1);

// The model in eval mode over `order` (indices into ds), in batches of train.batch_size with the
// evaluation transform (data.mean/std, no augmentation); for each batch, `on_batch` gets the
// logits (N, K) f32 on the CPU (host_logits, the default) or where the model is (rows of
// output_shape().back(), of which models::output_width(model) are classes), the batch (its
// host labels) and the position in `order` of its first sample. gpu and workers as for evaluate.
using BatchLogits = std::function<void(const Tensor& logits, const BatchFeed::Item& batch, int64_t first)>;
void forward_in_eval_mode(Graph& model, const data::Dataset& ds, std::vector<int64_t> order, const Config& cfg,
                          uint64_t step, GpuRun* gpu, int workers, const BatchLogits& on_batch,
                          bool host_logits = true);

}  // namespace dp::launch
