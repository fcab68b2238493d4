#include "launch/checkpoint_saver.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>

#include "runtime/log.h"

namespace dp::launch {
namespace {

std::shared_ptr<spdlog::logger> lg() { return log::get("ckpt"); }

int64_t fault_step(const Tunables& t, Tunable which) { return t.is_set(which) ? t.integer(which) : -1; }

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

CheckpointSaver::CheckpointSaver(CheckpointDir dir, int64_t keep, int64_t last_written, const Tunables& faults)
    : dir_(std::move(dir)),
      keep_(keep),
      last_written_(last_written),
      kill_in_write_at_(fault_step(faults, Tunable::FaultKillInCheckpointWrite)),
      no_space_at_(fault_step(faults, Tunable::FaultCheckpointNoSpace)) {}

CheckpointSaver::~CheckpointSaver() {
  try {
    wait();
  } catch (...) {  // a destructor on an error path: the write is over, only its log line failed
  }
}

// The injected faults strike once half of the tensors (at least one) are in the temporary file.
std::function<void(size_t, size_t)> CheckpointSaver::fault_for(int64_t step) const {
  if (step != kill_in_write_at_ && step != no_space_at_) return {};
  const bool kill = step == kill_in_write_at_;
  const std::string tmp = dir_.file_for(step) + ".tmp";
  return [kill, step, tmp](size_t i, size_t n) {
    if (i + 1 != std::max<size_t>(n / 2, 1)) return;
    if (kill) {
      lg()->warn("DPTRAIN_FAULT_KILL_IN_CKPT_WRITE_AT_STEP={}: killing this process (SIGKILL) in the middle of '{}'",
                 step, tmp);
      lg()->flush();
      std::raise(SIGKILL);
    }
    DP_THROW_USER("writing safetensors file '{}' failed: {} (errno {}) [injected: "
                  "DPTRAIN_FAULT_CKPT_NO_SPACE_AT_STEP={}]",
                  tmp, std::strerror(ENOSPC), ENOSPC, step);
  };
}

void CheckpointSaver::write_and_commit(int64_t step, const std::function<void()>& write_file) {
  write_file();
  dir_.commit(step, keep_);
}

void CheckpointSaver::write_now(int64_t step, const Graph& model, const optim::Optimizer& opt,
                                const CheckpointMeta& meta) {
  wait();
  write_and_commit(step, [&] { write_checkpoint_tensors(dir_.file_for(step), checkpoint_tensors(model, opt), meta,
                                                        fault_for(step)); });
  last_written_ = step;
}

std::unique_ptr<CheckpointStream> CheckpointSaver::open_stream(int64_t step, std::vector<CheckpointEntry> layout,
                                                               const CheckpointMeta& meta) {
  wait();
  return std::make_unique<CheckpointStream>(dir_.file_for(step), std::move(layout), meta, fault_for(step));
}

void CheckpointSaver::commit_stream(int64_t step, CheckpointStream& s) {
  write_and_commit(step, [&] { s.commit(); });
  last_written_ = step;
}

double CheckpointSaver::start(int64_t step, const Graph& model, const optim::Optimizer& opt,
                              const CheckpointMeta& meta, void* stream) {
  return start_with(step, [&] { snapshot_.take(model, opt, meta, stream); });
}

double CheckpointSaver::start_streamed(int64_t step, std::vector<CheckpointEntry> layout, const CheckpointMeta& meta,
                                       const std::function<void(const optim::StateSink&)>& feed) {
  return start_with(step, [&] { snapshot_.take_streamed(std::move(layout), meta, feed); });
}

double CheckpointSaver::start_with(int64_t step, const std::function<void()>& take_snapshot) {
  collect();  // a write that is over does not count as a wait
  double waited = 0;
  if (writer_.busy()) {
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t previous = in_flight_;
    const bool ok = wait();
    waited = seconds_since(t0);
    lg()->warn("the checkpoint of step {} waited {:.2f} s for the background write of step {} ({}): one write at a "
               "time (checkpoint.async), and checkpoints come faster than the disk takes them; raise "
               "checkpoint.every_steps or checkpoint.every_s to stop waiting",
               step, waited, previous, ok ? "written" : "failed");
  }
  const auto t0 = std::chrono::steady_clock::now();
  take_snapshot();
  lg()->info("checkpoint of step {}: {:.1f} MB host snapshot in {:.3f} s; {} is written in the background", step,
             snapshot_.bytes() / 1e6, seconds_since(t0), dir_.file_for(step));
  in_flight_ = step;
  writer_.start(dir_.file_for(step), [this, step, fault = fault_for(step)] {
    write_and_commit(step, [&] { snapshot_.write(dir_.file_for(step), fault); });
  });
  return waited;
}

void CheckpointSaver::collect() {
  if (auto o = writer_.poll()) report(*o);
}

bool CheckpointSaver::wait() {
  auto o = writer_.wait();
  return o ? report(*o) : true;
}

// One line either way; a failure leaves training running (the caller decides at the run's end).
bool CheckpointSaver::report(const AsyncWriter::Outcome& o) {
  const int64_t step = in_flight_;
  in_flight_ = -1;
  if (!o.error) {
    last_written_ = step;
    lg()->info("checkpoint {} written in the background ({:.2f} s)", o.what, o.seconds);
    return true;
  }
  std::string why;
  try {
    std::rethrow_exception(o.error);
  } catch (const std::exception& e) {
    why = e.what();
  } catch (...) {
    why = "an exception that is not a std::exception";
  }
  const std::string newest = last_written_ < 0
                                 ? std::string("none yet: a rerun starts over")
                                 : fmt::format("step {} ({})", last_written_, dir_.file_for(last_written_));
  lg()->error("the checkpoint of step {} could not be written in the background: {}; training goes on, and the newest "
              "complete checkpoint is {}; free space in {} before the next checkpoint",
              step, why, newest, dir_.path());
  return false;
}

}  // namespace dp::launch
