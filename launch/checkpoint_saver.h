// defines: CheckpointSaver, how rank 0 writes checkpoints into the run's CheckpointDir: now
// (write_now: the file and its commit before returning, as dptrain always did) or, with
// checkpoint.async, in the background (start: a host snapshot between two steps, then the file,
// `latest` and the keep-K pruning on an AsyncWriter thread while training goes on); and the
// checkpoint writer's injected faults (DPTRAIN_FAULT_KILL_IN_CKPT_WRITE_AT_STEP,
// DPTRAIN_FAULT_CKPT_NO_SPACE_AT_STEP: runtime/tunables.cpp).
//
// At most one write is in flight: start() waits for the previous one first (its snapshot is
// the one host block the next reuses) and logs that it had to wait. A background write that
// fails is reported (an error line naming the step, the reason and the newest complete
// checkpoint) by whichever call collects it (collect() after each step, start(), wait()), and
// training goes on: the files it left are complete ones only (the temporary file is removed,
// `latest` still names the previous checkpoint). The saver talks to no other rank: a sharded
// optimizer's state reaches it through the caller (appended to open_stream's file, or gathered
// whole before start(), on the training thread).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/checkpoint/async_writer.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/checkpoint_dir.h"
#include "runtime/checkpoint/checkpoint_snapshot.h"
#include "runtime/tunables.h"

namespace dp::launch {

class CheckpointSaver {
 public:
  // last_written: the newest complete checkpoint's step (a resumed run's), -1 for none.
  CheckpointSaver(CheckpointDir dir, int64_t keep, int64_t last_written, const Tunables& faults);
  ~CheckpointSaver();  // waits for the write in flight (an error path: its outcome is logged)

  // Writes and commits the checkpoint of `step` before returning (a write in flight is waited
  // for first). Throws what the writer throws.
  void write_now(int64_t step, const Graph& model, const optim::Optimizer& opt, const CheckpointMeta& meta);
  // write_now in two halves, for a checkpoint whose state arrives while it is written (ZeRO's save:
  // collectives/reducer/zero_shard.h stream_state): open_stream waits for a write in flight and
  // opens the file (the injected faults armed), the caller appends every tensor, commit_stream
  // commits it as write_now does. Both throw what the writer throws.
  std::unique_ptr<CheckpointStream> open_stream(int64_t step, std::vector<CheckpointEntry> layout,
                                                const CheckpointMeta& meta);
  void commit_stream(int64_t step, CheckpointStream& s);
  // Snapshots the state (on `stream`, a GPU run's cudaStream_t, else nullptr) and starts writing
  // it in the background. Throws only for the snapshot (e.g. out of host memory). Returns the
  // seconds it waited for the previous write (0 when that one was done already).
  double start(int64_t step, const Graph& model, const optim::Optimizer& opt, const CheckpointMeta& meta,
               void* stream);
  // start() for a state that arrives while the snapshot is taken (ZeRO's: CheckpointSnapshot::
  // take_streamed, `feed` handing the optimizer's state to it a bucket at a time).
  double start_streamed(int64_t step, std::vector<CheckpointEntry> layout, const CheckpointMeta& meta,
                        const std::function<void(const optim::StateSink&)>& feed);
  // Reports a background write that has finished; returns at once.
  void collect();
  // Waits for the write in flight and reports it. False when that write failed.
  bool wait();
  // The step of the newest checkpoint known complete on disk (-1: none).
  int64_t last_written() const { return last_written_; }

 private:
  std::function<void(size_t, size_t)> fault_for(int64_t step) const;
  bool report(const AsyncWriter::Outcome& o);
  void write_and_commit(int64_t step, const std::function<void()>& write_file);
  // start()'s frame around its snapshot: waits for the write in flight, take_snapshot(), then the
  // background write of the snapshot.
  double start_with(int64_t step, const std::function<void()>& take_snapshot);

  CheckpointDir dir_;
  int64_t keep_;
  int64_t last_written_;
  int64_t kill_in_write_at_ = -1, no_space_at_ = -1;  // the injected faults' steps (-1: none)
  int64_t in_flight_ = -1;                           // the step being written in the background
  CheckpointSnapshot snapshot_;
  AsyncWriter writer_;  // after snapshot_: destroyed (joined) before the snapshot it reads
};

}  // namespace dp::launch
