// defines: CaptureRange, when to call cudaProfilerStart / cudaProfilerStop for profile.steps, so
// `nsys profile --capture-range=cudaProfilerApi` records exactly those steps. The decision is
// pure (a step window and two flags); the calls are a hook, so it is tested without a GPU.
#pragma once
#include <cstdint>
#include <functional>

#include "launch/telemetry/step_range.h"

namespace dp::metrics {

class CaptureRange {
 public:
  // hook(true) starts the capture, hook(false) stops it. An empty window never calls it.
  CaptureRange(StepRange window, std::function<void(bool start)> hook);
  // Steps count from 1. Starts before the first step inside the window (the window's first
  // step, or a later one when a resumed run begins inside it).
  void before_step(int64_t step);
  // Stops after the window's last step.
  void after_step(int64_t step);
  // A run that ends (or throws) inside the window stops the capture here.
  ~CaptureRange();
  CaptureRange(const CaptureRange&) = delete;
  CaptureRange& operator=(const CaptureRange&) = delete;
  bool capturing() const { return started_ && !stopped_; }

 private:
  StepRange window_;
  std::function<void(bool)> hook_;
  bool started_ = false, stopped_ = false;
};

}  // namespace dp::metrics
