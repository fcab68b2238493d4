// cuda_event_marks (mark_source.h): timing events on the compute stream, made before the window,
// read after it.
#include <cuda_runtime.h>

#include <vector>

#include "base/error.h"
#include "runtime/cuda/check_runtime.h"
#include "runtime/cuda/stream.h"
#include "launch/telemetry/mark_source.h"
#include "launch/telemetry/trace.h"

namespace dp::metrics {
namespace {

class CudaEventMarks final : public MarkSource {
 public:
  explicit CudaEventMarks(cudaStream_t stream) : stream_(stream) {}
  void open(size_t n) override {
    events_.reserve(n);
    while (events_.size() < n) events_.emplace_back(true);
    // Outside the window: the stream drains, so mark 0 runs as soon as it is recorded and its
    // host time is the device timeline's origin.
    CHECK_CUDA(cudaStreamSynchronize(stream_));
  }
  void record(size_t i) override {
    DP_CHECK(i == recorded_, "mark {} recorded after {} marks", i, recorded_);
    while (events_.size() <= i) events_.emplace_back(true);  // more marks than open() planned for
    if (i == 0) origin_us_ = TraceRecorder::now_us();
    events_[i].record(stream_);
    ++recorded_;
  }
  std::vector<double> times_ms(size_t n) override {
    DP_CHECK(n <= recorded_, "times of {} marks asked, {} recorded", n, recorded_);
    std::vector<double> ms(n);
    if (n == 0) return ms;
    events_[n - 1].synchronize();  // one stream: every earlier mark has run too
    for (size_t i = 1; i < n; ++i) ms[i] = events_[i].elapsed_ms_since(events_[0]);
    return ms;
  }
  double origin_us() const override { return origin_us_; }

 private:
  cudaStream_t stream_;
  std::vector<cuda::CudaEvent> events_;
  size_t recorded_ = 0;
  double origin_us_ = 0;
};

}  // namespace

std::unique_ptr<MarkSource> cuda_event_marks(void* stream) {
  return std::make_unique<CudaEventMarks>(static_cast<cudaStream_t>(stream));
}

}  // namespace dp::metrics
