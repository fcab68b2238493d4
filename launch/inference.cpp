#include "launch/inference.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <optional>

#include <nlohmann/json.hpp>

#include "collectives/bootstrap/factory.h"
#include "collectives/make_communicator.h"
#include "launch/datasets.h"
#include "launch/evaluate.h"
#include "launch/gpu_run.h"
#include "launch/predict_input.h"
#include "launch/train_setup.h"
#include "models/build.h"
#include "models/weights_import.h"
#include "runtime/checkpoint/weights_file.h"
#include "runtime/log.h"

namespace dp::launch {
namespace {

std::shared_ptr<spdlog::logger> lg() { return log::get("infer"); }

constexpr const char* kWeightsHint =
    "Check that the cfg builds the model these weights are of (model.preset, model.num_classes, the [[layer]] list)";

// What eval and predict share: the ranks, the device, the model with its weights. Members are
// declared in the order they are made, so that they go in reverse.
class Inference {
 public:
  explicit Inference(const Config& cfg) : cfg_(cfg) {
    log::configure(cfg.run.log_level, "", false, cfg.run.log_levels);
    boot_ = make_bootstrap(cfg.dist.bootstrap, cfg.dist.timeout_s, cfg.dist.iface);
    comm_ = make_communicator(cfg.dist.backend, *boot_, cfg.dist.timeout_s, cfg.dist.iface);
    log::configure(cfg.run.log_level, "", false, cfg.run.log_levels);  // the console is rank 0's
    set_cpu_threads(cfg.train.threads);
    device_ = choose_device(cfg.train.device, boot_->local_rank(), boot_->local_size(), cfg.dist.backend);
    check_device_choices(cfg, device_);
    if (device_.is_cuda()) gpu_ = std::make_unique<GpuRun>(cfg.train, device_.index);
  }

  // The model for samples of `sample_shape`, with the weights of `path` (every rank reads them).
  // num_classes: model.num_classes resolved against the data (resolve_num_classes).
  void build(const Shape& sample_shape, const std::string& path, int64_t num_classes) {
    ModelConfig model = cfg_.model;
    model.num_classes = num_classes;
    model_ = models::build_model(model, sample_shape, static_cast<uint64_t>(cfg_.run.seed), device_,
                                 gpu_ ? gpu_->compute() : DType::F32, gpu_ ? gpu_->exec() : nullptr);
    model_->set_cpu_backend(cfg_.train.cpu_backend);  // the kernels the training run used, by default
    model_->set_cpu_conv_algorithm(cfg_.train.cpu_conv_algorithm);
    model_->set_cpu_gemm(cfg_.train.cpu_gemm);
    const std::string gpu_choices = models::apply_gpu_choices(*model_, cfg_.train);  // as the training run's
    lg()->info("{}", device_.is_cpu() ? model_->cpu_plan_summary() : gpu_choices);
    const WeightsLoad w = load_weights(path, *model_, {}, kWeightsHint, models::weights_translator(cfg_.model));
    lg()->info("weights {} ({}{}): {} tensors; {} on {}, {} rank{}", w.path, weights_kind_name(w.kind),
               w.translated.empty() ? "" : ", read as " + w.translated,
               w.plan.load.size(), cfg_.model.preset == PresetKind::None ? "[[layer]] model" : enum_name(cfg_.model.preset),
               device_.str(), comm_->size(), comm_->size() == 1 ? "" : "s");
  }

  Graph& model() { return *model_; }
  Communicator& comm() { return *comm_; }
  GpuRun* gpu() { return gpu_.get(); }
  int rank() const { return comm_->rank(); }
  int world() const { return comm_->size(); }
  // The loader's threads (data.workers resolved for this node's ranks).
  int workers() const { return loader_workers(cfg_.data, boot_->local_size()); }

 private:
  const Config& cfg_;
  std::unique_ptr<Bootstrap> boot_;
  std::unique_ptr<Communicator> comm_;
  Device device_;
  std::unique_ptr<GpuRun> gpu_;
  std::unique_ptr<Graph> model_;
};

// An output file that appears whole or not at all: written as <path>.tmp, renamed by commit().
class WholeFile {
 public:
  explicit WholeFile(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp"), out_(tmp_, std::ios::trunc) {
    if (!out_) DP_THROW_USER("cannot write '{}' (is its folder there and writable?)", tmp_);
  }
  ~WholeFile() {
    if (!committed_) std::filesystem::remove(tmp_, ec_);
  }
  void write(const std::string& text) { out_ << text; }
  void commit() {
    out_.flush();
    if (!out_) DP_THROW_USER("cannot write '{}' (disk full?)", tmp_);
    out_.close();
    std::filesystem::rename(tmp_, path_, ec_);
    if (ec_) DP_THROW_USER("cannot rename '{}' to '{}': {}", tmp_, path_, ec_.message());
    committed_ = true;
  }

 private:
  std::string path_, tmp_;
  std::ofstream out_;
  std::error_code ec_;
  bool committed_ = false;
};

}  // namespace

std::vector<std::pair<int64_t, double>> softmax_top_k(const float* z, int64_t num_classes, int64_t k) {
  const double zmax = *std::max_element(z, z + num_classes);
  std::vector<double> p(static_cast<size_t>(num_classes));
  double sum = 0;
  for (int64_t j = 0; j < num_classes; ++j) sum += p[j] = std::exp(static_cast<double>(z[j]) - zmax);
  std::vector<int64_t> idx(static_cast<size_t>(num_classes));
  std::iota(idx.begin(), idx.end(), 0);
  k = std::clamp<int64_t>(k, 0, num_classes);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](int64_t a, int64_t b) { return p[a] != p[b] ? p[a] > p[b] : a < b; });
  std::vector<std::pair<int64_t, double>> out;
  for (int64_t j = 0; j < k; ++j) out.emplace_back(idx[j], p[idx[j]] / sum);
  return out;
}

int run_eval(const Config& cfg, const InferenceOptions& o) {
  Inference inf(cfg);
  const Datasets ds = open_datasets(cfg.data, tar_index_dir(cfg), token_windows_of(cfg.model));
  const auto classes = static_cast<int64_t>(data_classes(ds).size());
  inf.build(ds.train.dataset->sample_shape(), o.weights,
            ds.tokens() ? cfg.model.num_classes : resolve_num_classes(cfg.model.num_classes, classes));
  models::SoftmaxCrossEntropy loss(cfg.train.label_smoothing);
  const EvalResult e = evaluate(inf.model(), loss, ds.eval, cfg, 0, inf.comm(), inf.gpu(), inf.workers());
  if (inf.rank() != 0) return 0;
  if (e.tokens)
    std::printf("eval %s: loss %.6f ppl %.4f token top1 %.6f top5 %.6f (%lld windows, %lld tokens)\n",
                o.weights.c_str(), e.loss, e.ppl(), e.top1, e.top5, static_cast<long long>(e.samples),
                static_cast<long long>(e.positions));
  else
    std::printf("eval %s: loss %.6f top1 %.6f top5 %.6f (%lld samples)\n", o.weights.c_str(), e.loss, e.top1, e.top5,
                static_cast<long long>(e.samples));
  std::fflush(stdout);
  if (o.out.empty()) return 0;
  WholeFile f(o.out);
  nlohmann::ordered_json j{{"weights", o.weights}, {"loss", e.loss}, {"top1", e.top1}, {"top5", e.top5},
                           {"samples", e.samples}, {"ranks", inf.world()}};
  if (e.tokens) j["ppl"] = e.ppl(), j["tokens"] = e.positions;
  f.write(j.dump() + "\n");
  f.commit();
  return 0;
}

namespace {

constexpr int64_t kChunk = 16384;  // samples per gather: bounds rank 0's table, streams the output

// One chunk [begin, begin + n) of the input: each rank its samples, their top-k gathered into a
// table (n, k, 2) of (class, probability) that the all-reduce fills on every rank (each row is
// written by one rank, zeros elsewhere: the sums are exact).
Tensor predict_chunk(Inference& inf, const Config& cfg, const PredictInput& in, int64_t begin, int64_t n,
                     int64_t k) {
  std::vector<int64_t> order;
  for (int64_t i = begin + inf.rank(); i < begin + n; i += inf.world()) order.push_back(i);
  Tensor table = Tensor::zeros({n, k, 2}, DType::F64);
  double* t = table.data<double>();
  const std::vector<int64_t> mine = order;
  forward_in_eval_mode(inf.model(), *in.samples, std::move(order), cfg, 0, inf.gpu(), inf.workers(),
                       [&](const Tensor& logits, const BatchFeed::Item& b, int64_t first) {
                         // classes scores in rows of ld (longer when the last layer pads them)
                         const int64_t classes = models::output_width(inf.model()), ld = logits.dim(1);
                         for (int64_t r = 0; r < b.n; ++r) {
                           const auto top = softmax_top_k(logits.data<float>() + r * ld, classes, k);
                           double* row = t + (mine[first + r] - begin) * k * 2;
                           for (size_t j = 0; j < top.size(); ++j)
                             row[2 * j] = static_cast<double>(top[j].first), row[2 * j + 1] = top[j].second;
                         }
                       });
  inf.comm().allreduce(table, ReduceOp::Sum);
  return table;
}

std::string prediction_lines(const PredictInput& in, const Tensor& table, int64_t begin, int64_t k) {
  std::string out;
  const double* t = table.data<double>();
  for (int64_t i = 0; i < table.dim(0); ++i) {
    const SampleSource src = sample_source(in, begin + i);
    nlohmann::ordered_json j{{"input", *src.file}};
    if (src.index >= 0) j["index"] = src.index;
    std::vector<int64_t> classes;
    std::vector<double> probs;
    for (int64_t c = 0; c < k; ++c)
      classes.push_back(static_cast<int64_t>(t[(i * k + c) * 2])), probs.push_back(t[(i * k + c) * 2 + 1]);
    j["classes"] = classes;
    j["probs"] = probs;
    out += j.dump() + "\n";
  }
  return out;
}

// model.num_classes for predict: as configured, or (0: the data's count) the classes of the cfg's
// data set, which is opened for that only (its listing, not its samples).
int64_t predict_num_classes(const Config& cfg) {
  if (cfg.model.num_classes > 0) return cfg.model.num_classes;
  return resolve_num_classes(0, static_cast<int64_t>(data_classes(open_datasets(cfg.data, tar_index_dir(cfg))).size()));
}

}  // namespace

int run_predict(const Config& cfg, const InferenceOptions& o) {
  if (cfg.data.dataset == data::DatasetKind::Tokens || model_takes_tokens(cfg.model))
    DP_THROW_USER("dptrain predict gives the classes of images and arrays; a language model (data.dataset = "
                  "\"tokens\", model.preset = \"gpt2\") continues text with dptrain sample, and dptrain eval gives "
                  "its loss and perplexity");
  Inference inf(cfg);
  const PredictInput in = open_predict_input(o.input, image_options(cfg.data), tar_index_dir(cfg));
  inf.build(in.samples->sample_shape(), o.weights, predict_num_classes(cfg));
  const Shape& out = inf.model().output_shape();
  if (out.size() != 1)
    DP_THROW_USER("the model's output has per-sample shape {}; predict needs class scores [K] (end with a linear layer)",
                  shape_str(out));
  const int64_t k = std::min(o.topk, models::output_width(inf.model()));
  lg()->info("predict: {}, top {} of {} classes -> {}", in.what, k, models::output_width(inf.model()), o.out);
  std::optional<WholeFile> file;
  if (inf.rank() == 0) file.emplace(o.out);
  const int64_t n = in.samples->size();
  for (int64_t begin = 0; begin < n; begin += kChunk) {
    const int64_t m = std::min(kChunk, n - begin);
    const Tensor table = predict_chunk(inf, cfg, in, begin, m, k);
    if (file) file->write(prediction_lines(in, table, begin, k));
  }
  if (!file) return 0;
  file->commit();
  std::printf("predict: %lld predictions (top %lld) written to %s\n", static_cast<long long>(n),
              static_cast<long long>(k), o.out.c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace dp::launch
