// defines: MarkSource, where the per-layer profile (layer_profile.h) gets its time marks from:
// clock_marks (the CPU: a monotonic clock read on the host) and cuda_event_marks (a GPU: CUDA
// events recorded on the compute stream, read after the window; mark_source_cuda.cpp, CUDA builds
// only; a build without CUDA throws).
//
// Marks are numbered 0, 1, 2, ... in the order they are recorded. A span is the time between two
// marks, so the profile never pairs events itself: it asks for every mark's time once, after the
// window. On a GPU that is the window's only host wait; recording a mark never waits.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

namespace dp::metrics {

class MarkSource {
 public:
  virtual ~MarkSource() = default;
  // Before the window's first mark (outside the window): room for n marks. The GPU makes its n
  // events here and waits for the stream to drain, so that mark 0's wall-clock time is known.
  virtual void open(size_t n) = 0;
  // Records mark i (i = the number of marks so far) now. No host wait; beyond the n of open() the
  // GPU makes another event (a host call, still no wait).
  virtual void record(size_t i) = 0;
  // After the window: the time of marks 0..n-1 in milliseconds after mark 0 (non-decreasing).
  // The GPU waits here for mark n-1, once.
  virtual std::vector<double> times_ms(size_t n) = 0;
  // Wall-clock microseconds of mark 0 (TraceRecorder::now_us's clock): the trace's time origin.
  virtual double origin_us() const = 0;
};

// The CPU's marks: now_us() read at each record (default: TraceRecorder::now_us, a steady clock
// anchored to the wall clock). Tests inject a clock.
std::unique_ptr<MarkSource> clock_marks(std::function<double()> now_us = {});

// A GPU's marks: timing events recorded on `stream` (a cudaStream_t) of the current device.
std::unique_ptr<MarkSource> cuda_event_marks(void* stream);

}  // namespace dp::metrics
