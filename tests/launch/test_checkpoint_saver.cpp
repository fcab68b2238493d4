// CheckpointSaver (launch/checkpoint_saver.h) on its own: one background write at a time. A second
// save started while the first 50 MB file is still being written waits for it (start() returns the
// wait; the log says so), a save started after the previous write was collected does not wait, and
// each file holds its own step, `latest` naming the newest.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "launch/checkpoint_saver.h"
#include "models/build.h"
#include "runtime/config.h"
#include "runtime/log.h"
#include "runtime/optim/optimizer.h"
#include "tests/launch/run_files.h"

namespace dp::launch {
namespace {

namespace fs = std::filesystem;

TEST(CheckpointSaver, ASaveWhileTheLastIsBeingWrittenWaitsForIt) {
  log::configure("off");
  const fs::path dir = fs::temp_directory_path() / ("dptrain_saver_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  CheckpointDir ckpts(dir.string());
  ckpts.prepare();
  // 4096 x 1024 weights with AdamW: 3 x 16 MB per file, long to write and fsync.
  Config c = parse_config("[model]\nnum_classes = 1024\n[[layer]]\ntype = \"flatten\"\n[[layer]]\ntype = \"linear\"\n"
                          "name = \"fc\"\nout_features = 1024\n",
                          "m.cfg", {});
  auto g = models::build_model(c.model, {1, 64, 64}, 1);
  auto opt = optim::make_adamw(g->num_parameters(), {});
  auto meta = [&](int64_t step) {
    CheckpointMeta m;
    m.step = step, m.batch_size = 1, m.dataset_size = 10, m.optimizer = opt->name();
    return m;
  };
  CheckpointSaver saver(ckpts, 0, -1, Tunables{});
  EXPECT_EQ(saver.start(1, *g, *opt, meta(1), nullptr), 0.0);
  EXPECT_GT(saver.start(2, *g, *opt, meta(2), nullptr), 0.0) << "the write of step 1 (48 MB) was not over yet";
  EXPECT_EQ(saver.last_written(), 1);
  EXPECT_TRUE(saver.wait());
  EXPECT_EQ(saver.last_written(), 2);
  EXPECT_EQ(saver.start(3, *g, *opt, meta(3), nullptr), 0.0) << "nothing in flight: no wait";
  EXPECT_TRUE(saver.wait());
  for (int64_t step : {1, 2, 3})
    EXPECT_EQ(read_checkpoint_meta(SafetensorsFile::open(ckpts.file_for(step))).step, step);
  EXPECT_EQ(testutil::read_file((dir / "latest").string()), "step-00000003.safetensors\n");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dp::launch
