// tools/diffckpt and tools/ckptinfo, run as built (DPTRAIN_BINARY_DIR): exact output lines and
// exit codes for identical, differing, within-tolerance, one-sided and mismatching tensors,
// replica folders, corrupt files, and usage and file errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "models/build.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/config.h"
#include "runtime/optim/sgd.h"
#include "runtime/checkpoint/safetensors.h"
#include "tests/bytes.h"

namespace dp {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

struct ToolRun {
  int code = -1;
  std::string out, err;
  std::vector<std::string> lines() const {
    std::vector<std::string> v;
    std::istringstream in(out);
    for (std::string l; std::getline(in, l);) v.push_back(l);
    return v;
  }
};

class ToolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("dptrain_tools_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs a tool from the build directory with `args` (shell words, quoted by the caller).
  ToolRun tool(const std::string& name, const std::string& args) {
    const std::string bin = std::string(DPTRAIN_BINARY_DIR) + "/" + name;
    if (!fs::exists(bin)) ADD_FAILURE() << bin << " is not built (ninja " << name << ")";
    const std::string out = dir_ + "/stdout", err = dir_ + "/stderr";
    const std::string cmd = bin + " " + args + " >" + out + " 2>" + err;
    ToolRun r;
    const int st = std::system(cmd.c_str());
    r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r.out = test::file_bytes(out);
    r.err = test::file_bytes(err);
    return r;
  }

  // Writes a file with w (f32 [2, 3]), b (f32 [3]), n (i64 scalar); `edit` changes them first.
  std::string write(const std::string& name, const std::function<void(Tensor& w, Tensor& b, Tensor& n)>& edit = {},
                    std::map<std::string, std::string> meta = {{"step", "7"}}) {
    Tensor w = Tensor::zeros({2, 3}), b = Tensor::zeros({3}), n = Tensor::zeros({}, DType::I64);
    for (int i = 0; i < 6; ++i) w.data<float>()[i] = 0.5f * static_cast<float>(i);  // 0 .. 2.5
    for (int i = 0; i < 3; ++i) b.data<float>()[i] = -1.0f - static_cast<float>(i);
    n.data<int64_t>()[0] = 3;
    if (edit) edit(w, b, n);
    const std::string path = dir_ + "/" + name;
    write_safetensors(path, {{"n", n}, {"w", w}, {"b", b}}, meta);
    return path;
  }

  std::string dir_;
};

TEST_F(ToolsTest, DiffIdenticalFilesExitsZero) {
  const std::string a = write("a.safetensors"), b = write("b.safetensors");
  ToolRun r = tool("diffckpt", a + " " + b);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.lines(), (std::vector<std::string>{"A: " + a, "B: " + b, "identical: 3 tensors"}));
  EXPECT_EQ(r.err, "");
}

TEST_F(ToolsTest, DiffListsDifferingTensorsWithErrorsAndCounts) {
  const std::string a = write("a.safetensors");
  const std::string b = write("b.safetensors", [](Tensor& w, Tensor&, Tensor& n) {
    w.data<float>()[5] = 2.0f;   // was 2.5: abs 0.5, rel 0.5 / 2.5 = 0.2
    w.data<float>()[1] = 0.25f;  // was 0.5: abs 0.25, rel 0.5
    n.data<int64_t>()[0] = 5;    // was 3
  }, {{"step", "8"}});
  ToolRun r = tool("diffckpt", a + " " + b);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_EQ(r.lines(), (std::vector<std::string>{
                           "A: " + a, "B: " + b, "differ: n I64[]: 1 of 1 elements, max abs 2, max rel 0.4",
                           "differ: w F32[2, 3]: 2 of 6 elements, max abs 0.5, max rel 0.5",
                           "note: metadata differs: step",
                           "different: 2 differ, 0 mismatch, 0 only in A, 0 only in B (A has 3 tensors, B 3)"}));

  // Tolerances: |a - b| <= atol + rtol * max(|a|, |b|) for every element.
  r = tool("diffckpt", a + " " + b + " --atol 2");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.lines()[2], "close: n I64[]: 1 of 1 elements not identical, max abs 2, max rel 0.4 (within tolerance)");
  EXPECT_EQ(r.lines().back(), "within tolerance: 3 tensors (2 not bitwise identical)");
  r = tool("diffckpt", a + " " + b + " --rtol 0.45");  // n (0.4) passes, w's 0.5 does not
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.lines()[3], "differ: w F32[2, 3]: 1 of 6 elements, max abs 0.5, max rel 0.5");
  r = tool("diffckpt", "--rtol 0.5 " + a + " " + b);
  EXPECT_EQ(r.code, 0);
}

TEST_F(ToolsTest, DiffOneSidedAndMismatchingTensors) {
  const std::string a = write("a.safetensors");
  Tensor w = Tensor::zeros({3, 3}), extra = Tensor::zeros({1}), n = Tensor::zeros({}, DType::I64);
  n.data<int64_t>()[0] = 3;
  const std::string b = dir_ + "/b.safetensors";
  write_safetensors(b, {{"n", n}, {"w", w}, {"extra", extra}}, {{"step", "7"}});
  ToolRun r = tool("diffckpt", a + " " + b);
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.lines(), (std::vector<std::string>{
                           "A: " + a, "B: " + b, "mismatch: w: F32[2, 3] in A, F32[3, 3] in B", "only in A: b",
                           "only in B: extra",
                           "different: 0 differ, 1 mismatch, 1 only in A, 1 only in B (A has 3 tensors, B 3)"}));
}

TEST_F(ToolsTest, DiffAllComparesEveryReplicaWithRankZero) {
  fs::create_directories(dir_ + "/reps");
  for (int r = 0; r < 3; ++r)
    fs::rename(write("r.safetensors", r == 2 ? std::function<void(Tensor&, Tensor&, Tensor&)>(
                                                   [](Tensor&, Tensor& b, Tensor&) { b.data<float>()[0] = -1.5f; })
                                             : nullptr),
               dir_ + "/reps/replica-rank" + std::to_string(r) + ".safetensors");
  ToolRun r = tool("diffckpt", "--all " + dir_ + "/reps");
  EXPECT_EQ(r.code, 1) << r.err;
  const std::string r0 = dir_ + "/reps/replica-rank0.safetensors";
  EXPECT_EQ(r.lines(), (std::vector<std::string>{
                           "== rank 1 vs rank 0", "A: " + dir_ + "/reps/replica-rank1.safetensors", "B: " + r0,
                           "identical: 3 tensors", "== rank 2 vs rank 0",
                           "A: " + dir_ + "/reps/replica-rank2.safetensors", "B: " + r0,
                           "differ: b F32[3]: 1 of 3 elements, max abs 0.5, max rel 0.333333",
                           "different: 1 differ, 0 mismatch, 0 only in A, 0 only in B (A has 3 tensors, B 3)",
                           "replicas differ from rank 0: rank 2"}));
  EXPECT_EQ(tool("diffckpt", "--all " + dir_ + "/reps --atol 0.5").lines().back(), "all 3 replicas match rank 0");
  fs::remove(dir_ + "/reps/replica-rank2.safetensors");
  EXPECT_EQ(tool("diffckpt", "--all " + dir_ + "/reps").code, 0);
}

TEST_F(ToolsTest, DiffUsageAndFileErrorsExitTwo) {
  const std::string a = write("a.safetensors");
  ToolRun r = tool("diffckpt", "");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("diffckpt: error: give two checkpoint files, or --all DIR\nusage: diffckpt A B"));
  r = tool("diffckpt", a + " " + dir_ + "/missing.safetensors");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "diffckpt: error: cannot open safetensors file '" + dir_ +
                       "/missing.safetensors': No such file or directory (errno 2)\n");
  r = tool("diffckpt", a + " " + a + " --atol -1");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("diffckpt: error: --atol = '-1' is not a finite number >= 0"));
  r = tool("diffckpt", "--all " + dir_);
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("no replica-rank<r>.safetensors files in '" + dir_ + "'"));
  std::ofstream(dir_ + "/junk.safetensors") << "not a safetensors file at all";
  r = tool("diffckpt", a + " " + dir_ + "/junk.safetensors");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("junk.safetensors"));
}

// A real checkpoint of a small MLP with SGD momentum state.
std::string write_checkpoint_file(const std::string& dir) {
  Config c = parse_config("[model]\npreset = \"mlp\"\nhidden = [4]\nnum_classes = 3\n", "m.cfg");
  auto g = models::build_model(c.model, {2}, 1);
  auto opt = optim::make_sgd(g->num_parameters(), {0.9, 0, 0, false});
  for (int s = 0; s < 2; ++s) {
    g->grads().flat().fill_(0.125 * (s + 1));
    opt->step(g->params().flat(), g->grads().flat(), 0.1);
  }
  CheckpointMeta m;
  m.step = 2;
  m.optimizer = "sgd";
  m.optimizer_steps = 2;
  m.config = "[run]\nseed = 0\n";
  fs::create_directories(dir + "/checkpoints");
  const std::string path = dir + "/checkpoints/step-00000002.safetensors";
  write_checkpoint(path, *g, *opt, m);
  std::ofstream(dir + "/checkpoints/latest") << "step-00000002.safetensors\n";
  return path;
}

TEST_F(ToolsTest, CkptinfoPrintsMetadataAndTensorTableAndChecksCrcs) {
  const std::string path = write_checkpoint_file(dir_);
  SafetensorsFile f = SafetensorsFile::open(path);
  ToolRun r = tool("ckptinfo", path);
  EXPECT_EQ(r.code, 0) << r.err;
  auto lines = r.lines();
  ASSERT_GT(lines.size(), 10u);
  EXPECT_EQ(lines[0], "file: " + path);
  EXPECT_EQ(lines[1], "metadata:");
  EXPECT_THAT(r.out, HasSubstr("\n  config: 2 lines (--config prints them)\n"));
  EXPECT_THAT(r.out, HasSubstr("\n  crc32c: one per tensor (checked below)\n"));
  EXPECT_THAT(r.out, HasSubstr("\n  format: dptrain-checkpoint\n  format_version: 1\n"));
  EXPECT_THAT(r.out, HasSubstr("\n  step: 2\n"));
  EXPECT_THAT(r.out, HasSubstr("\ntensors: 8\n"));
  // One row per tensor: name, dtype, shape, the CRC recomputed from the bytes, ok.
  Tensor w = f.get("optim.fc1.weight.momentum_buffer");
  EXPECT_THAT(r.out, HasSubstr(fmt::format("\n  optim.fc1.weight.momentum_buffer  F32   [4, 2]               {}  ok\n",
                                           crc_hex(tensor_crc(w)))));
  EXPECT_EQ(lines.back(), "check: all 8 tensors match their CRC-32C");
  // A directory resolves through `latest`, from the run directory or its checkpoints/.
  EXPECT_EQ(tool("ckptinfo", dir_).out, r.out);
  EXPECT_EQ(tool("ckptinfo", dir_ + "/checkpoints").out, r.out);
  EXPECT_THAT(tool("ckptinfo", "--config " + path).out, HasSubstr("config:\n[run]\nseed = 0\n"));
}

TEST_F(ToolsTest, CkptinfoFlagsMetadataEditedInPlace) {
  const std::string path = write_checkpoint_file(dir_);
  EXPECT_THAT(tool("ckptinfo", path).out, HasSubstr("\ncheck: the metadata matches its CRC-32C\n"));
  {
    std::fstream io(path, std::ios::binary | std::ios::in | std::ios::out);
    std::string bytes((std::istreambuf_iterator<char>(io)), std::istreambuf_iterator<char>());
    const size_t at = bytes.find("\"step\":\"2\"");
    ASSERT_NE(at, std::string::npos);
    io.seekp(static_cast<std::streamoff>(at + 8));
    io.write("9", 1);  // "step": "2" -> "9"
  }
  ToolRun r = tool("ckptinfo", path);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.out, HasSubstr("\n  step: 9\n"));
  EXPECT_THAT(r.out, HasSubstr("\ncheck: the metadata FAILS its CRC-32C (stored "));
  EXPECT_THAT(r.out, HasSubstr("): edited or damaged\n"));
}

TEST_F(ToolsTest, CkptinfoFlagsACorruptTensorAndFileErrors) {
  const std::string path = write_checkpoint_file(dir_);
  SafetensorsFile f = SafetensorsFile::open(path);
  const auto& info = f.info("fc2.bias");
  uint64_t header_len = 0;
  {
    std::fstream io(path, std::ios::binary | std::ios::in | std::ios::out);
    io.read(reinterpret_cast<char*>(&header_len), 8);
    io.seekp(static_cast<std::streamoff>(8 + header_len + info.begin));
    io.write("\x7f", 1);
  }
  ToolRun r = tool("ckptinfo", path);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.out, HasSubstr("  BAD (stored "));
  EXPECT_EQ(r.lines().back(), "check: 1 of 8 tensors FAIL their CRC-32C: the file is corrupt");
  for (const auto& l : r.lines())
    if (l.find("BAD") != std::string::npos) {
      EXPECT_THAT(l, HasSubstr("  fc2.bias  "));
    }

  r = tool("ckptinfo", dir_ + "/nope.safetensors");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "ckptinfo: error: cannot open safetensors file '" + dir_ +
                       "/nope.safetensors': No such file or directory (errno 2)\n");
  fs::create_directories(dir_ + "/empty");
  r = tool("ckptinfo", dir_ + "/empty");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("is a directory without a 'latest' file"));
  EXPECT_EQ(tool("ckptinfo", "").code, 2);

  // A weights-only file has no CRCs: listed, not failed.
  const std::string plain = write("plain.safetensors");
  r = tool("ckptinfo", plain);
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.lines().back(), "check: no CRCs stored in this file (not a dptrain checkpoint)");
}

}  // namespace
}  // namespace dp
