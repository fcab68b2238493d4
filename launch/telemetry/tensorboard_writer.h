// defines: TbWriter, TensorBoard's event file writer (scalars), and read_event_file, its
// checking reader.
//
// A file `events.out.tfevents.<unix seconds>.<host>` in the folder given (TensorBoard reads
// every such file in a run folder, in name order): first an Event with file_version
// "brain.Event:2", then one Event per add_scalars call, each framed as a TFRecord
// (launch/telemetry/tensorboard_record.h). Rank 0 writes; the trainer calls, per logging step:
//
//   metrics::TbWriter tb(run.path());                           // once, if run.tensorboard
//   tb.add_scalars(step, {{"train/loss", loss}, {"train/lr", lr}, {"perf/samples_per_s", sps}});
//   tb.add_scalar("eval/accuracy", acc, step);
//
// Tags (TensorBoard groups by the part before '/'), so that every run's charts line up:
//   train/loss train/accuracy train/lr train/loss_scale eval/loss eval/accuracy eval/top5
//   perf/samples_per_s perf/step_ms perf/comm_ms perf/comm_exposed_ms
// A resumed run opens a new file in the same folder; TensorBoard drops the events of the old
// file past the resumed step (EventAccumulator's purge_orphaned_data), so the charts show one run.
//
// Each call writes its record and flushes it to the OS (flush_each = true), so a killed run
// keeps everything logged; with flush_each = false, call flush() (the destructor flushes too).
// Not thread-safe: one thread writes (the training loop).
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "launch/telemetry/tensorboard_event.h"

namespace dp::metrics {

inline constexpr const char* kTbFileVersion = "brain.Event:2";

// Seconds since the Unix epoch (the wall_time TensorBoard shows as "relative" and "wall").
double wall_time_now();

class TbWriter {
 public:
  // Creates `dir` (and parents) and the event file in it; a name taken already (two writers
  // in the same second) gets a ".1", ".2", ... suffix. Throws UserError when `dir` is not writable.
  explicit TbWriter(const std::string& dir, bool flush_each = true);
  ~TbWriter();
  TbWriter(const TbWriter&) = delete;
  TbWriter& operator=(const TbWriter&) = delete;

  // One Event holding every (tag, value) at `step`; wall_time < 0 means now.
  void add_scalars(int64_t step, const std::vector<std::pair<std::string, double>>& scalars, double wall_time = -1);
  void add_scalar(const std::string& tag, double value, int64_t step, double wall_time = -1) {
    add_scalars(step, {{tag, value}}, wall_time);
  }
  void flush();
  const std::string& path() const { return path_; }

 private:
  void write_event(const Event& e);
  std::string path_;
  std::FILE* f_ = nullptr;
  bool flush_each_;
};

// Every Event of one file, in order. Checks every record's two CRCs, that the file starts with a
// file_version event "brain.Event:<n>" and that every event decodes; throws DpError naming the
// file, record and byte (launch/telemetry/tensorboard_record.h) otherwise.
std::vector<Event> read_event_file(const std::string& path);

}  // namespace dp::metrics
