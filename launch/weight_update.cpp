#include "launch/weight_update.h"

#include <cmath>
#include <utility>

namespace dp::launch {

WeightUpdate::WeightUpdate(Graph& model, std::unique_ptr<optim::Optimizer> opt, double max_norm)
    : model_(model), opt_(std::move(opt)) {
  if (max_norm > 0) clip_.emplace(max_norm);
}

namespace {

// Every rank the whole state and the same update.
class ReplicatedUpdate final : public WeightUpdate {
 public:
  ReplicatedUpdate(Graph& model, std::unique_ptr<optim::Optimizer> opt, double max_norm, void* cuda_stream)
      : WeightUpdate(model, std::move(opt), max_norm), stream_(cuda_stream) {}

  void configure_reducer(ReducerOptions& ro) override { ro.shard = false; }
  std::optional<ResumePoint> resume(const CheckpointDir& dir) override { return resume_latest(dir, model_, *opt_); }
  void zero_grads() override { model_.zero_grad(); }
  double step(double lr) override {
    const double norm = clip_ ? clip_->clip(model_.grads().flat(), stream_) : std::nan("");
    opt_->step(model_.params().flat(), model_.grads().flat(), lr);
    return norm;
  }

 private:
  void* stream_;  // cudaStream_t, or null on the CPU
};

// This rank's pieces (ZeroShard); checkpoints hold the whole state in zero 0's format.
class ShardedUpdate final : public WeightUpdate {
 public:
  ShardedUpdate(Graph& model, std::unique_ptr<ZeroShard> shard, std::unique_ptr<optim::Optimizer> opt,
                double max_norm, void* cuda_stream)
      : WeightUpdate(model, std::move(opt), max_norm), shard_(std::move(shard)), stream_(cuda_stream) {
    DP_CHECK(!(stream_ && shard_->stage() == 2), "ZeRO stage 2 gives gradient pages back on the CPU only; on a GPU "
             "set train.zero = 1");
  }

  const ZeroShard* shard() const override { return shard_.get(); }
  void configure_reducer(ReducerOptions& ro) override {
    ro.shard = true;
    if (shard_->stage() == 2) ro.on_reduced = [this](int b) { shard_->release_grads(b, model_.grads().flat()); };
  }
  // The checkpoint's state streamed straight into this rank's pieces (load_checkpoint's pieces):
  // no whole optimizer, one tensor of the file in memory at a time.
  std::optional<ResumePoint> resume(const CheckpointDir& dir) override {
    return resume_latest(dir, model_, *opt_, shard_->pieces());
  }
  bool stream_state(const ZeroShard::StateSink& sink) override {
    shard_->stream_state(*opt_, sink);
    return true;
  }
  void measure_memory(bool on) override {
    if (shard_->stage() == 2) shard_->measure_peak(on);
  }
  // Stage 2: zeros where the rank keeps gradient memory; the pages it gave back read as zeros.
  void zero_grads() override {
    if (shard_->stage() == 2) shard_->zero_grads(model_.grads().flat());
    else model_.zero_grad();
  }
  // This rank's pieces, then every rank's parameters. On a GPU the clip and the update are
  // enqueued on the compute stream; the gather waits for them (the parameters of mixed precision's
  // 16-bit copy are then cast from the gathered masters: the trainer's refresh_compute_params).
  double step(double lr) override {
    const double norm = clip_ ? shard_->clip(model_.grads().flat(), *clip_, stream_) : std::nan("");
    shard_->step(*opt_, model_.params().flat(), model_.grads().flat(), lr);
    shard_->gather_params(model_.params().flat(), stream_);
    return norm;
  }

 private:
  std::unique_ptr<ZeroShard> shard_;
  void* stream_;  // cudaStream_t, or null on the CPU
};

}  // namespace

std::unique_ptr<WeightUpdate> replicated_update(Graph& model, std::unique_ptr<optim::Optimizer> opt, double max_norm,
                                                void* cuda_stream) {
  return std::make_unique<ReplicatedUpdate>(model, std::move(opt), max_norm, cuda_stream);
}

std::unique_ptr<WeightUpdate> sharded_update(Graph& model, std::unique_ptr<ZeroShard> shard,
                                             std::unique_ptr<optim::Optimizer> opt, double max_norm,
                                             void* cuda_stream) {
  return std::make_unique<ShardedUpdate>(model, std::move(shard), std::move(opt), max_norm, cuda_stream);
}

}  // namespace dp::launch
