#include "launch/evaluate.h"

#include <cmath>
#include <utility>
#include <vector>

#include "kernels/cpu/label_rank.h"
#include "launch/batch_feed.h"
#include "launch/gpu_run.h"
#include "models/build.h"

namespace dp::launch {

double EvalResult::ppl() const { return std::exp(loss); }

Tensor score_rows(const Tensor& logits) {
  if (logits.ndim() <= 2) return logits;
  const int64_t k = logits.dim(-1);
  return logits.reshape({logits.numel() / k, k});
}

Tensor label_rows(const Tensor& labels) { return labels.ndim() <= 1 ? labels : labels.reshape({labels.numel()}); }

void count_hits(const Tensor& logits, const Tensor& labels, int64_t& top1, int64_t& top5, int64_t classes) {
  const int64_t n = logits.dim(0), ld = logits.dim(1), k = classes > 0 ? classes : ld;
  DP_CHECK(k <= ld, "count_hits: {} classes in rows of {} scores", k, ld);
  std::vector<int32_t> ranks(static_cast<size_t>(n));
  kernels::cpu::label_ranks(logits.data<float>(), labels.data<int32_t>(), n, k, 5, ranks.data(), ld);
  for (int32_t r : ranks) top1 += r < 1, top5 += r < 5;
}

void forward_in_eval_mode(Graph& model, const data::Dataset& ds, std::vector<int64_t> order, const Config& cfg,
                          uint64_t step, GpuRun* gpu, int workers, const BatchLogits& on_batch, bool host_logits) {
  const uint64_t seed = static_cast<uint64_t>(cfg.run.seed);
  const StepContext ctx = gpu ? gpu->context(false, seed, step, nullptr) : StepContext{false, seed, step};
  const data::Transform transform = transform_of(cfg.data, false);
  DeviceInputPtr input = gpu ? make_device_input(*gpu, transform, ds, cfg.train.batch_size, seed) : nullptr;
  BatchFeed feed(ds, std::move(order), cfg.train.batch_size, /*drop_last=*/false, transform, seed, 0, input.get(),
                 workers);
  BatchFeed::Item b;
  Tensor host;
  int64_t first = 0;
  while (feed.next(b)) {
    const Tensor* logits = &model.forward(ctx, b.x);
    if (gpu && host_logits) {
      ensure_tensor(host, logits->shape());
      host.copy_from(*logits);
      logits = &host;
    }
    on_batch(*logits, b, first);
    first += b.n;
  }
}

EvalResult evaluate(Graph& model, models::SoftmaxCrossEntropy& loss, const DataSplit& split, const Config& cfg,
                    uint64_t step, Communicator& comm, GpuRun* gpu, int workers) {
  EvalResult r;
  r.tokens = split.dataset->holds_tokens();
  std::vector<int64_t> shard;
  for (size_t k = static_cast<size_t>(comm.rank()); k < split.indices.size(); k += static_cast<size_t>(comm.size()))
    shard.push_back(split.indices[k]);
  double loss_sum = 0;
  int64_t top1 = 0, top5 = 0;
  // The loss and the hits where the logits are: a language model's (N, T, V) logits stay on the GPU.
  // V classes in rows of the output's width (a padded LM head's rows are longer).
  const int64_t classes = models::output_width(model);
  forward_in_eval_mode(
      model, *split.dataset, std::move(shard), cfg, step, gpu, workers,
      [&](const Tensor& logits, const BatchFeed::Item& b, int64_t) {
        const Tensor z = score_rows(logits), y = label_rows(gpu ? b.y : b.y_host);
        const double mean = gpu ? gpu->mean_loss(loss, z, y, classes) : loss.forward_backward(z, y, nullptr, classes);
        loss_sum += mean * static_cast<double>(z.dim(0));
        if (gpu) gpu->count_hits(z, y, top1, top5, classes);
        else count_hits(z, y, top1, top5, classes);
        r.samples += b.n;
        r.positions += z.dim(0);
      },
      /*host_logits=*/false);
  Tensor sums = Tensor::zeros({5}, DType::F64);
  double* v = sums.data<double>();
  v[0] = loss_sum, v[1] = static_cast<double>(top1), v[2] = static_cast<double>(top5);
  v[3] = static_cast<double>(r.samples), v[4] = static_cast<double>(r.positions);
  comm.allreduce(sums, ReduceOp::Sum);
  loss_sum = v[0], top1 = static_cast<int64_t>(v[1]), top5 = static_cast<int64_t>(v[2]);
  r.samples = static_cast<int64_t>(v[3]), r.positions = static_cast<int64_t>(v[4]);
  if (r.positions > 0) {
    const double n = static_cast<double>(r.positions);
    r.loss = loss_sum / n;
    r.top1 = static_cast<double>(top1) / n;
    r.top5 = static_cast<double>(top5) / n;
  }
  return r;
}

}  // namespace dp::launch
