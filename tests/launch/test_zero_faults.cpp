// ZeRO stage 1 (train.zero = 1) resuming from a checkpoint whose optimizer state is incomplete,
// through the real binary (`dptrain --nproc 2`, ring collectives): each rank reads the checkpoint's
// whole state (zero 0's format) and keeps its pieces (launch/weight_update.cpp, ShardedUpdate::resume),
// so a damaged optimizer tensor must be refused by the checkpoint loader's checks before any rank
// takes a piece of it, with the file named:
//   - an optimizer tensor missing (the file rewritten without it);
//   - the file truncated inside its last optimizer tensor;
//   - an optimizer tensor cut short (a slice: half of its elements, the file rewritten).
// With that checkpoint the only one, the run stops before training (exit status 2, a UserError)
// naming the file and what is wrong; with an older good checkpoint beside it, the run warns naming
// the damaged file and resumes from the older one, ending with a straight zero-0 run's bytes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <sys/wait.h>
#include <vector>

#include "runtime/checkpoint/safetensors.h"
#include "tests/launch/run_files.h"

namespace {

namespace fs = std::filesystem;
using dp::SafetensorsFile;
using dp::Tensor;
using dp::testutil::differing;
using dp::testutil::read_file;
using dp::testutil::tensors_of;

const std::string kBin = std::string(DPTRAIN_BINARY_DIR) + "/dptrain";
const std::string kSrc = DPTRAIN_SOURCE_DIR;

std::string root_for(const std::string& tag) {
  return (fs::temp_directory_path() / ("dptrain_zero_faults_" + tag + "_" + std::to_string(::getpid()))).string();
}

// gpt_tiny at test size on 2 ranks, 20 steps of AdamW with clipping, a checkpoint every
// `every` steps; returns the exit status (WEXITSTATUS). Output in <root>.log.
int dptrain(const std::string& root, int zero, int every, const std::string& env = "") {
  fs::create_directories(root);
  const std::string cmd =
      env + " " + kBin + " --nproc 2 " + kSrc +
      "/models/gpt_tiny.cfg --set run.name=m --set data.dataset=synthetic --set data.synthetic_train=256"
      " --set data.synthetic_eval=16 --set model.n_layer=2 --set model.n_head=2 --set model.n_embd=32"
      " --set model.block_size=16 --run-dir " + root +
      " --set train.steps=20 --set train.batch_size=4 --set train.optimizer=adamw --set train.grad_clip=0.05"
      " --set train.warmup_steps=3 --set train.threads=1 --set train.log_every=5 --set train.eval_every=0"
      " --set run.tensorboard=false --set checkpoint.every_steps=" + std::to_string(every) +
      " --set dist.first_bucket_mb=0.002 --set dist.bucket_mb=0.01 --set train.zero=" + std::to_string(zero) +
      " > " + root + ".log 2>&1";
  const int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

std::string ckpt(const std::string& root, int step) {
  return root + "/m/checkpoints/step-" + std::string(8 - std::to_string(step).size(), '0') + std::to_string(step) +
         ".safetensors";
}

void remove_run(const std::string& root) {
  fs::remove_all(root);
  fs::remove(root + ".log");
}

// The optimizer's tensors of a checkpoint, in file order.
std::vector<std::string> optim_names(const std::string& path) {
  std::vector<std::string> out;
  for (const auto& n : SafetensorsFile::open(path).names())
    if (n.rfind("optim.", 0) == 0) out.push_back(n);
  return out;
}

enum class Damage { MissingTensor, Truncated, ShortSlice };
const char* damage_name(Damage d) {
  switch (d) {
    case Damage::MissingTensor: return "MissingTensor";
    case Damage::Truncated: return "Truncated";
    default: return "ShortSlice";
  }
}

// Damages the checkpoint at `path`; returns the name of the optimizer tensor it damaged.
std::string damage(const std::string& path, Damage d) {
  const std::vector<std::string> optim = optim_names(path);
  EXPECT_GE(optim.size(), 2u) << path << " holds no optimizer state";
  if (optim.empty()) return "";
  const std::string victim = optim.back();  // the file's last optimizer tensor
  if (d == Damage::Truncated) {
    const SafetensorsFile f = SafetensorsFile::open(path);
    const auto& info = f.info(victim);
    uint64_t header_len = 0;
    std::ifstream(path, std::ios::binary).read(reinterpret_cast<char*>(&header_len), 8);
    fs::resize_file(path, 8 + header_len + (info.begin + info.end) / 2);  // half of its bytes are gone
    return victim;
  }
  // Rewrite the file: every tensor but the victim as it is, the metadata as it is (its crc32c
  // entries still list the victim: the loader's name and shape checks come before the CRCs).
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, std::string> meta;
  {
    const SafetensorsFile f = SafetensorsFile::open(path);
    meta = f.metadata();
    for (const auto& n : f.names()) {
      if (n != victim) {
        tensors.emplace_back(n, f.get(n));
      } else if (d == Damage::ShortSlice) {
        const Tensor whole = f.get(n);
        const int64_t half = whole.numel() / 2;
        Tensor part = Tensor::zeros({half}, whole.dtype());
        part.copy_from(whole.slice_flat(0, {half}));
        tensors.emplace_back(n, part);
      }
    }
  }
  dp::write_safetensors(path, tensors, meta);
  return victim;
}

class Zero1DamagedOptimizerState : public testing::TestWithParam<Damage> {};

// The damaged checkpoint is the only one: refused before training, the file and tensor named.
TEST_P(Zero1DamagedOptimizerState, OnlyCheckpointIsRefusedNamingTheFile) {
  const Damage d = GetParam();
  const std::string root = root_for(std::string("only_") + damage_name(d));
  remove_run(root);
  // Killed (SIGKILL, by the fault hook) after step 12: the step-10 checkpoint is the newest and only one.
  EXPECT_NE(dptrain(root, 1, 10, "DPTRAIN_FAULT_KILL_AFTER_STEP=12"), 0);
  const std::string file = ckpt(root, 10);
  ASSERT_TRUE(fs::exists(file)) << read_file(root + ".log");
  const std::string tensor = damage(file, d);
  ASSERT_FALSE(tensor.empty());

  EXPECT_EQ(dptrain(root, 1, 10), 2) << read_file(root + ".log");  // kExitUserError
  std::string why;
  switch (d) {
    case Damage::MissingTensor:
      why = "checkpoint '" + file + "' does not match the model: it has no tensor '" + tensor + "'";
      break;
    case Damage::Truncated:
      why = "safetensors file '" + file + "': tensor '" + tensor + "': data_offsets [";
      break;
    case Damage::ShortSlice:
      why = "checkpoint '" + file + "' does not match the model: tensor '" + tensor + "' is ";
      break;
  }
  const std::string refused =
      "none of the 1 checkpoints in '" + root + "/m/checkpoints' can be resumed (each reason is logged above); the newest: ";
  // Every rank read the file and refused it; no step was trained after the refusal.
  for (int r = 0; r < 2; ++r) {
    const std::string log = read_file(root + "/m/logs/rank-" + std::to_string(r) + ".log");
    EXPECT_NE(log.find("cannot resume from " + file + ": " + why), std::string::npos) << "rank " << r << ":\n" << log;
  }
  const std::string out = read_file(root + ".log");
  EXPECT_NE(out.find(refused + why), std::string::npos) << out;
  if (d == Damage::Truncated) {
    EXPECT_NE(out.find("(truncated file?)"), std::string::npos) << out;
  }
  if (d == Damage::ShortSlice) {
    EXPECT_NE(out.find("in the checkpoint but"), std::string::npos) << out;
  }
  EXPECT_FALSE(fs::exists(ckpt(root, 20)));
  EXPECT_FALSE(fs::exists(root + "/m/final.safetensors"));
  remove_run(root);
}

// An older good checkpoint beside the damaged newest: a warning names the damaged file, the run
// resumes from the older one on every rank and ends with a straight zero-0 run's bytes.
TEST_P(Zero1DamagedOptimizerState, NewestDamagedFallsBackToThePreviousAndEqualsZero0) {
  const Damage d = GetParam();
  const std::string a = root_for(std::string("straight_") + damage_name(d)),
                    b = root_for(std::string("fallback_") + damage_name(d));
  remove_run(a);
  remove_run(b);
  ASSERT_EQ(dptrain(a, 0, 5), 0) << read_file(a + ".log");
  EXPECT_NE(dptrain(b, 1, 5, "DPTRAIN_FAULT_KILL_AFTER_STEP=12"), 0);
  ASSERT_TRUE(fs::exists(ckpt(b, 5)));
  ASSERT_TRUE(fs::exists(ckpt(b, 10))) << read_file(b + ".log");
  const std::string tensor = damage(ckpt(b, 10), d);
  ASSERT_FALSE(tensor.empty());

  ASSERT_EQ(dptrain(b, 1, 5), 0) << read_file(b + ".log");
  for (int r = 0; r < 2; ++r) {
    const std::string log = read_file(b + "/m/logs/rank-" + std::to_string(r) + ".log");
    EXPECT_NE(log.find("cannot resume from " + ckpt(b, 10) + ": "), std::string::npos) << "rank " << r << ":\n" << log;
    EXPECT_NE(log.find("'" + tensor + "'"), std::string::npos) << "rank " << r << ":\n" << log;
    EXPECT_NE(log.find("resumed from " + ckpt(b, 5)), std::string::npos) << "rank " << r << ":\n" << log;
  }
  EXPECT_EQ(differing(tensors_of(ckpt(a, 20)), tensors_of(ckpt(b, 20))), std::vector<std::string>{});
  EXPECT_EQ(differing(tensors_of(a + "/m/final.safetensors"), tensors_of(b + "/m/final.safetensors")),
            std::vector<std::string>{});
  remove_run(a);
  remove_run(b);
}

INSTANTIATE_TEST_SUITE_P(Damages, Zero1DamagedOptimizerState,
                         testing::Values(Damage::MissingTensor, Damage::Truncated, Damage::ShortSlice),
                         [](const testing::TestParamInfo<Damage>& i) { return std::string(damage_name(i.param)); });

}  // namespace
