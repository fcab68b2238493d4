#include "launch/telemetry/capture_range.h"

#include <utility>

namespace dp::metrics {

CaptureRange::CaptureRange(StepRange window, std::function<void(bool)> hook)
    : window_(window), hook_(std::move(hook)) {}

void CaptureRange::before_step(int64_t step) {
  if (started_ || window_.empty() || !window_.contains(step)) return;
  started_ = true;
  hook_(true);
}

void CaptureRange::after_step(int64_t step) {
  if (!capturing() || step < window_.last) return;
  stopped_ = true;
  hook_(false);
}

CaptureRange::~CaptureRange() {
  if (!capturing()) return;
  stopped_ = true;
  try {
    hook_(false);
  } catch (...) {  // a destructor during unwinding must not throw; the capture ends with the process
  }
}

}  // namespace dp::metrics
