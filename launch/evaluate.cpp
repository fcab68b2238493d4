#include "launch/evaluate.h"

#include <utility>
#include <vector>

#include "launch/batch_feed.h"
#include "launch/gpu_run.h"

namespace dp::launch {

void count_hits(const Tensor& logits, const Tensor& labels, int64_t& top1, int64_t& top5) {
  const int64_t n = logits.dim(0), k = logits.dim(1);
  const float* z = logits.data<float>();
  const int32_t* y = labels.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    const float* row = z + i * k;
    const float target = row[y[i]];
    // Rank of the true class = number of classes scoring strictly higher (ties count for it).
    int64_t higher = 0;
    for (int64_t j = 0; j < k; ++j) higher += row[j] > target;
    top1 += higher < 1;
    top5 += higher < 5;
  }
}

void forward_in_eval_mode(Graph& model, const data::Dataset& ds, std::vector<int64_t> order, const Config& cfg,
                          uint64_t step, GpuRun* gpu, int workers, const BatchLogits& on_batch) {
  const uint64_t seed = static_cast<uint64_t>(cfg.run.seed);
  const StepContext ctx = gpu ? gpu->context(false, seed, step, nullptr) : StepContext{false, seed, step};
  const data::Transform transform = transform_of(cfg.data, false);
  DeviceInputPtr input = gpu ? make_device_input(*gpu, transform, ds, cfg.train.batch_size, seed) : nullptr;
  BatchFeed feed(ds, std::move(order), cfg.train.batch_size, /*drop_last=*/false, transform, seed, 0, input.get(),
                 workers);
  BatchFeed::Item b;
  Tensor host_logits;
  int64_t first = 0;
  while (feed.next(b)) {
    const Tensor* logits = &model.forward(ctx, b.x);
    if (gpu) {
      if (!host_logits.defined() || host_logits.shape() != logits->shape()) host_logits = Tensor::zeros(logits->shape());
      host_logits.copy_from(*logits);
      logits = &host_logits;
    }
    on_batch(*logits, b, first);
    first += b.n;
  }
}

EvalResult evaluate(Graph& model, models::SoftmaxCrossEntropy& loss, const DataSplit& split, const Config& cfg,
                    uint64_t step, Communicator& comm, GpuRun* gpu, int workers) {
  EvalResult r;
  std::vector<int64_t> shard;
  for (size_t k = static_cast<size_t>(comm.rank()); k < split.indices.size(); k += static_cast<size_t>(comm.size()))
    shard.push_back(split.indices[k]);
  double loss_sum = 0;
  int64_t top1 = 0, top5 = 0;
  forward_in_eval_mode(model, *split.dataset, std::move(shard), cfg, step, gpu, workers,
                       [&](const Tensor& logits, const BatchFeed::Item& b, int64_t) {
                         loss_sum += loss.forward_backward(logits, b.y_host, nullptr) * static_cast<double>(b.n);
                         count_hits(logits, b.y_host, top1, top5);
                         r.samples += b.n;
                       });
  Tensor sums = Tensor::zeros({4}, DType::F64);
  double* v = sums.data<double>();
  v[0] = loss_sum, v[1] = static_cast<double>(top1), v[2] = static_cast<double>(top5), v[3] = static_cast<double>(r.samples);
  comm.allreduce(sums, ReduceOp::Sum);
  loss_sum = v[0], top1 = static_cast<int64_t>(v[1]), top5 = static_cast<int64_t>(v[2]);
  r.samples = static_cast<int64_t>(v[3]);
  if (r.samples > 0) {
    r.loss = loss_sum / r.samples;
    r.top1 = static_cast<double>(top1) / r.samples;
    r.top5 = static_cast<double>(top5) / r.samples;
  }
  return r;
}

}  // namespace dp::launch
