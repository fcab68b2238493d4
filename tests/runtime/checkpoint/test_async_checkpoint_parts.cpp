// The parts of the asynchronous checkpoint (issue 32) that need no run: the schedule's pure
// decisions (runtime/checkpoint/checkpoint_schedule.h), AsyncWriter handing a background job's
// exception to its waiter (async_writer.h), and CheckpointSnapshot writing, after the live state
// has moved on, the very bytes write_checkpoint wrote at the step it was taken (checkpoint_snapshot.h).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/rng.h"
#include "models/build.h"
#include "runtime/checkpoint/async_writer.h"
#include "runtime/checkpoint/checkpoint_schedule.h"
#include "runtime/checkpoint/checkpoint_snapshot.h"
#include "runtime/config.h"
#include "runtime/log.h"
#include "runtime/optim/adamw.h"
#include "tests/bytes.h"

namespace dp {
namespace {

namespace fs = std::filesystem;

TEST(CheckpointSchedule, StepsEveryNAndNeverForZero) {
  EXPECT_TRUE(checkpoint_due_by_steps(10, 10));
  EXPECT_TRUE(checkpoint_due_by_steps(20, 10));
  EXPECT_FALSE(checkpoint_due_by_steps(11, 10));
  EXPECT_FALSE(checkpoint_due_by_steps(10, 0));
  EXPECT_FALSE(checkpoint_due_by_steps(0, 0));
}

TEST(CheckpointSchedule, TimeDueAtOrAfterEverySecondsAndNeverForZero) {
  EXPECT_FALSE(checkpoint_due_by_time(60, 0));
  EXPECT_FALSE(checkpoint_due_by_time(60, 59.999));
  EXPECT_TRUE(checkpoint_due_by_time(60, 60));
  EXPECT_TRUE(checkpoint_due_by_time(60, 3600));
  EXPECT_FALSE(checkpoint_due_by_time(0, 1e9));  // 0 = off
  EXPECT_TRUE(checkpoint_due_by_time(1e-9, 1e-6));
}

TEST(AsyncWriter, HandsTheJobsExceptionToTheWaiter) {
  AsyncWriter w;
  EXPECT_FALSE(w.busy());
  EXPECT_FALSE(w.wait().has_value());
  w.start("bad", [] { throw UserError("disk full at byte 42"); });
  EXPECT_TRUE(w.busy());
  auto o = w.wait();
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->what, "bad");
  ASSERT_TRUE(o->error != nullptr);
  try {
    std::rethrow_exception(o->error);
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("disk full at byte 42"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(w.busy());
}

TEST(AsyncWriter, PollIsEmptyWhileTheJobRunsAndStartRefusesASecondJob) {
  AsyncWriter w;
  std::atomic<bool> release{false};
  int value = 0;
  w.start("slow", [&] {
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    value = 7;
  });
  EXPECT_FALSE(w.poll().has_value());
  EXPECT_THROW(w.start("second", [] {}), DpError);
  release = true;
  auto o = w.wait();
  ASSERT_TRUE(o.has_value());
  EXPECT_TRUE(o->error == nullptr);
  EXPECT_EQ(value, 7);
}

// A linear model with AdamW, a few steps of made-up gradients.
struct SmallRun {
  std::unique_ptr<Graph> g;
  std::unique_ptr<optim::Optimizer> opt;
  explicit SmallRun(uint64_t seed) {
    Config c = parse_config("[model]\nnum_classes = 3\n[[layer]]\ntype = \"flatten\"\n[[layer]]\ntype = \"linear\"\n"
                            "name = \"fc\"\nout_features = 3\n",
                            "m.cfg", {});
    g = models::build_model(c.model, {1, 4, 4}, seed);
    opt = optim::make_adamw(g->num_parameters(), {});
  }
  void advance(int steps) {
    Rng rng(11, 3);
    for (int s = 0; s < steps; ++s) {
      float* gr = g->grads().flat().data<float>();
      for (int64_t i = 0; i < g->grads().numel(); ++i) gr[i] = static_cast<float>(rng.normal());
      opt->step(g->params().flat(), g->grads().flat(), 0.01);
    }
  }
  CheckpointMeta meta(int64_t step) const {
    CheckpointMeta m;
    m.step = step, m.seed = 42, m.batch_size = 8, m.dataset_size = 64;
    m.optimizer = opt->name(), m.optimizer_steps = opt->steps();
    return m;
  }
};

TEST(CheckpointSnapshot, WritesTheBytesWriteCheckpointWroteAtItsStep) {
  log::configure("off");
  const fs::path dir = fs::temp_directory_path() / ("dptrain_snapshot_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  SmallRun run(3);
  run.advance(4);
  write_checkpoint((dir / "sync.safetensors").string(), *run.g, *run.opt, run.meta(4));
  CheckpointSnapshot snap;
  snap.take(*run.g, *run.opt, run.meta(4));
  const size_t block = snap.bytes();
  run.advance(3);  // training goes on: the live state is no longer step 4's
  snap.write((dir / "async.safetensors").string());
  const std::string sync = test::file_bytes((dir / "sync.safetensors").string());
  ASSERT_GT(sync.size(), 200u);
  EXPECT_EQ(test::file_bytes((dir / "async.safetensors").string()), sync);
  // A second take of the same model reuses the block and again matches the synchronous writer.
  write_checkpoint((dir / "sync7.safetensors").string(), *run.g, *run.opt, run.meta(7));
  snap.take(*run.g, *run.opt, run.meta(7));
  EXPECT_EQ(snap.bytes(), block);
  snap.write((dir / "async7.safetensors").string());
  EXPECT_EQ(test::file_bytes((dir / "async7.safetensors").string()), test::file_bytes((dir / "sync7.safetensors").string()));
  EXPECT_NE(test::file_bytes((dir / "async7.safetensors").string()), sync);
  fs::remove_all(dir);
}

// take_streamed (ZeRO's asynchronous save): the optimizer state handed over in arena pieces gives
// the block take() gives, so the file is write_checkpoint's; a feed that leaves an element out is
// refused rather than written with what the block held before.
TEST(CheckpointSnapshot, StreamedStateGivesTheWholeStatesFileAndAMissingPieceIsRefused) {
  log::configure("off");
  const fs::path dir = fs::temp_directory_path() / ("dptrain_snapshot_streamed_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  SmallRun run(5);
  run.advance(3);
  write_checkpoint((dir / "sync.safetensors").string(), *run.g, *run.opt, run.meta(3));
  const auto state = run.opt->state();
  const int64_t n = run.g->params().numel();
  // Pieces of 7 elements, in arena order, as a bucketed stream hands them.
  const auto feed_all_but = [&](int64_t skip) {
    return [&, skip](const optim::StateSink& sink) {
      for (size_t k = 0; k < state.size(); ++k)
        for (int64_t b = 0; b < n; b += 7)
          if (b != skip) sink(static_cast<int>(k), b, state[k].second.data<float>() + b, std::min<int64_t>(7, n - b));
    };
  };
  CheckpointSnapshot snap;
  snap.take_streamed(checkpoint_layout(*run.g, state_slots(*run.opt)), run.meta(3), feed_all_but(-1));
  snap.write((dir / "streamed.safetensors").string());
  const std::string sync = test::file_bytes((dir / "sync.safetensors").string());
  ASSERT_GT(sync.size(), 200u);
  EXPECT_EQ(test::file_bytes((dir / "streamed.safetensors").string()), sync);
  try {
    snap.take_streamed(checkpoint_layout(*run.g, state_slots(*run.opt)), run.meta(3), feed_all_but(14));
    ADD_FAILURE() << "a stream without elements [14, 21) was taken";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("elements"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dp
