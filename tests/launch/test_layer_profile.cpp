// profile.layers end to end on the CPU: a 2-rank dptrain run of models/fmnist_cnn.cfg writes
// <run>/layers.json (the fixed format: every layer of the model once, the ReLUs oneDNN folds named
// in their producer's "fused", the accounting identity), rank 0 logs the table in the same order,
// and trace.json gets a "device" lane with the spans of the steps where the two windows overlap.
// On a GPU (LayerProfileGpu): the same from CUDA events, in bf16, on synthetic data. No timing is
// asserted.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "tests/gpu_test.h"
#include "models/build.h"
#include "runtime/config.h"
#include "runtime/device_memory.h"
#include "tests/launch/run_files.h"

namespace dp {
namespace {

namespace fs = std::filesystem;
using testutil::read_file;
const std::string kBin = std::string(DPTRAIN_BINARY_DIR) + "/dptrain";
const std::string kCfg = std::string(DPTRAIN_SOURCE_DIR) + "/models/fmnist_cnn.cfg";
const std::string kData = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";

fs::path temp_root(const std::string& tag) {
  const fs::path p = fs::temp_directory_path() / ("dptrain_layer_profile_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

// The model's layer names in graph order, and the type of each.
std::vector<std::pair<std::string, std::string>> model_layers() {
  const Config cfg = load_config(kCfg);
  auto g = models::build_model(cfg.model, {1, 28, 28}, 0);
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& n : g->nodes()) out.emplace_back(n.layer->name(), n.layer->type());
  return out;
}

// layers.json's structure: the fixed names, every layer of the model once (a row, or fused into
// one: `fused` must then be the ReLUs expected), rows slowest first, the identity.
void check_layers_json(const nlohmann::json& j, int64_t first, int64_t last, const std::string& device,
                       const std::string& precision, bool relus_fused) {
  std::set<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.insert(it.key());
  EXPECT_EQ(keys, (std::set<std::string>{"steps", "device", "precision", "step_ms", "layers", "other"}));
  EXPECT_EQ(j["steps"], nlohmann::json::array({first, last}));
  EXPECT_EQ(j["device"], device);
  EXPECT_EQ(j["precision"], precision);
  std::map<std::string, int> seen;
  std::map<std::string, std::string> type_of;
  for (const auto& [name, type] : model_layers()) type_of[name] = type;
  double layers_ms = 0, prev = 1e300;
  for (const auto& l : j["layers"]) {
    std::set<std::string> lk;
    for (auto it = l.begin(); it != l.end(); ++it) lk.insert(it.key());
    EXPECT_EQ(lk, (std::set<std::string>{"name", "type", "out_shape", "fwd_ms", "bwd_ms", "fused"}));
    const std::string name = l["name"];
    ++seen[name];
    EXPECT_EQ(l["type"], type_of[name]) << name;
    EXPECT_FALSE(l["out_shape"].empty()) << name;
    const double t = l["fwd_ms"].get<double>() + l["bwd_ms"].get<double>();
    EXPECT_GE(l["fwd_ms"].get<double>(), 0.0) << name;
    EXPECT_GE(l["bwd_ms"].get<double>(), 0.0) << name;
    EXPECT_LE(t, prev) << name << ": rows are sorted slowest first";
    prev = t;
    layers_ms += t;
    for (const auto& f : l["fused"]) {
      ++seen[f.get<std::string>()];
      EXPECT_EQ(type_of[f.get<std::string>()], "relu") << f << " fused into " << name;
    }
  }
  for (const auto& [name, type] : type_of) EXPECT_EQ(seen[name], 1) << name << " appears once";
  EXPECT_EQ(seen.size(), type_of.size());
  size_t fused = 0;
  for (const auto& l : j["layers"]) fused += l["fused"].size();
  EXPECT_EQ(fused, relus_fused ? 3u : 0u) << "the cnn's three ReLUs fold into bn1, bn2 and fc1 under oneDNN";
  const auto& o = j["other"];
  const double other = o["loss_ms"].get<double>() + o["optimizer_ms"].get<double>() + o["comm_wait_ms"].get<double>() +
                       o["data_wait_ms"].get<double>() + o["unattributed_ms"].get<double>();
  const double step = j["step_ms"];
  EXPECT_GT(step, 0.0);
  EXPECT_NEAR(layers_ms + other, step, 1e-9 * step) << "the accounting identity";
  EXPECT_GE(o["unattributed_ms"].get<double>(), -1e-6 * step) << "the phases tile the step";
  for (const char* k : {"loss_ms", "optimizer_ms", "comm_wait_ms", "data_wait_ms"}) EXPECT_GE(o[k].get<double>(), 0.0) << k;
}

TEST(LayerProfileRun, TwoRankCpuRunWritesLayersJsonTheTableAndTheDeviceLane) {
  if (!fs::exists(kData)) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  const fs::path root = temp_root("cpu");
  const std::string cmd = kBin + " --nproc 2 " + kCfg + " --run-dir " + root.string() +
                          " --set train.steps=8 --set train.warmup_steps=2 --set data.train_limit=2048 --set data.eval_limit=256"
                          " --set train.batch_size=32 --set profile.layers=3-6 --set profile.trace_steps=5-8 > " +
                          (root / "out.log").string() + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << read_file((root / "out.log").string());
  const fs::path run = root / "fmnist_cnn";
  const auto j = nlohmann::json::parse(read_file((run / "layers.json").string()));
  check_layers_json(j, 3, 6, "cpu", "fp32", true);
  EXPECT_GT(j["other"]["comm_wait_ms"].get<double>(), 0.0) << "two ranks wait for their all-reduce";

  // Rank 0's table, rows in layers.json's order: "     1  bn1 +relu1  batchnorm2d  [32, 28, 28]  f32 ...".
  const std::string log0 = read_file((run / "logs/rank-0.log").string());
  ASSERT_NE(log0.find("layer profile of steps 3-6 (4 steps) on cpu, fp32: "), std::string::npos) << log0;
  size_t at = log0.find("layer profile of steps");
  for (size_t i = 0; i < j["layers"].size(); ++i) {
    const auto& l = j["layers"][i];
    std::string name = l["name"];
    for (const auto& f : l["fused"]) name += " +" + f.get<std::string>();
    const std::string row = fmt::format("{:>6}  {}", i + 1, name);
    const size_t pos = log0.find(row, at);
    ASSERT_NE(pos, std::string::npos) << row << "\n" << log0;
    at = pos;
  }
  for (const char* line : {"  layers, forward ", "  layers, backward ", "  loss ", "  optimizer ", "  comm wait ",
                           "  data wait ", "  unattributed ", "  step "})
    EXPECT_NE(log0.find(line, at), std::string::npos) << line;
  EXPECT_NE(log0.find("layer profile written to " + (run / "layers.json").string()), std::string::npos);
  EXPECT_EQ(read_file((run / "logs/rank-1.log").string()).find("layer profile of steps"), std::string::npos)
      << "rank 0 alone reports";

  // trace.json: each rank's "device" lane holds steps 5 and 6 (where 3-6 and 5-8 overlap): per
  // step every row's forward and backward, the data wait, the loss, the comm wait, the optimizer.
  const auto trace = nlohmann::json::parse(read_file((run / "trace.json").string()));
  std::map<int, int> device_tid;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["args"]["name"] == "device") device_tid[e["pid"]] = e["tid"];
  ASSERT_EQ(device_tid.size(), 2u) << "both ranks have the lane";
  std::map<std::pair<int, std::string>, int> count;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["tid"] == device_tid[e["pid"]]) {
      ++count[{e["pid"].get<int>(), e["cat"].get<std::string>() + " " + e["name"].get<std::string>()}];
      EXPECT_GE(e["dur"].get<double>(), 0.0);
    }
  for (int rank : {0, 1}) {
    for (const auto& l : j["layers"]) {
      EXPECT_EQ((count[{rank, "forward " + l["name"].get<std::string>()}]), 2) << rank << " " << l["name"];
      EXPECT_EQ((count[{rank, "backward " + l["name"].get<std::string>()}]), 2) << rank << " " << l["name"];
    }
    for (const char* p : {"step data wait", "step loss", "step comm wait", "step optimizer"})
      EXPECT_EQ((count[{rank, p}]), 2) << rank << " " << p;
  }
  size_t events = 0;
  for (const auto& [k, v] : count) events += v;
  EXPECT_EQ(events, 2u * 2u * (2 * j["layers"].size() + 4)) << "nothing outside the overlap";
  fs::remove_all(root);
}

TEST(LayerProfileRun, AWindowTheRunNeverReachesIsSaidAndWritesNothing) {
  if (!fs::exists(kData)) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  const fs::path root = temp_root("late");
  const std::string cmd = kBin + " " + kCfg + " --run-dir " + root.string() +
                          " --set train.steps=2 --set train.warmup_steps=0 --set data.train_limit=512 --set data.eval_limit=64"
                          " --set train.batch_size=32 --set profile.layers=5-6 > " + (root / "out.log").string() +
                          " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << read_file((root / "out.log").string());
  EXPECT_FALSE(fs::exists(root / "fmnist_cnn/layers.json"));
  EXPECT_NE(read_file((root / "out.log").string())
                .find("profile.layers = \"5-6\": no step of the window ran in this run (steps 1..2); no layers.json "
                      "written"),
            std::string::npos)
      << read_file((root / "out.log").string());
  fs::remove_all(root);
}

// The real thing on a GPU: CUDA events around every layer, bf16, read after the window.
DP_GPU_TEST(LayerProfileGpu, Bf16RunTimesEveryLayerWithCudaEvents) {
  const fs::path root = temp_root("gpu");
  const std::string cmd = kBin + " " + kCfg + " --run-dir " + root.string() +
                          " --set train.device=cuda --set train.precision=bf16 --set train.steps=12 --set train.warmup_steps=2"
                          " --set data.dataset=synthetic --set data.synthetic_shape=[1,28,28]"
                          " --set data.synthetic_train=2048 --set data.synthetic_eval=128 --set profile.layers=5-10"
                          " --set profile.trace_steps=9-12 > " + (root / "out.log").string() + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << read_file((root / "out.log").string());
  const fs::path run = root / "fmnist_cnn";
  const auto j = nlohmann::json::parse(read_file((run / "layers.json").string()));
  check_layers_json(j, 5, 10, "cuda:0", "bf16", false);
  EXPECT_EQ(j["other"]["comm_wait_ms"], 0.0) << "one rank: no reducer";
  const std::string log0 = read_file((run / "logs/rank-0.log").string());
  EXPECT_NE(log0.find("layer profile of steps 5-10 (6 steps) on cuda:0, bf16: "), std::string::npos) << log0;
  const auto trace = nlohmann::json::parse(read_file((run / "trace.json").string()));
  int device_events = 0;
  int tid = -1;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["args"]["name"] == "device") tid = e["tid"];
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["tid"] == tid) ++device_events;
  EXPECT_EQ(device_events, static_cast<int>(2 * (2 * j["layers"].size() + 3))) << "steps 9 and 10";
  fs::remove_all(root);
}

}  // namespace
}  // namespace dp
