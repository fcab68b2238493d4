#include "launch/telemetry/mark_source.h"

#include <utility>

#include "base/error.h"
#include "launch/telemetry/trace.h"

namespace dp::metrics {
namespace {

class ClockMarks final : public MarkSource {
 public:
  explicit ClockMarks(std::function<double()> now_us) : now_us_(std::move(now_us)) {
    if (!now_us_) now_us_ = [] { return TraceRecorder::now_us(); };
  }
  void open(size_t n) override { us_.reserve(n); }
  void record(size_t i) override {
    DP_CHECK(i == us_.size(), "mark {} recorded after {} marks", i, us_.size());
    us_.push_back(now_us_());
  }
  std::vector<double> times_ms(size_t n) override {
    DP_CHECK(n <= us_.size(), "times of {} marks asked, {} recorded", n, us_.size());
    std::vector<double> ms(n);
    for (size_t i = 0; i < n; ++i) ms[i] = (us_[i] - us_[0]) / 1e3;
    return ms;
  }
  double origin_us() const override { return us_.empty() ? 0 : us_[0]; }

 private:
  std::function<double()> now_us_;
  std::vector<double> us_;
};

}  // namespace

std::unique_ptr<MarkSource> clock_marks(std::function<double()> now_us) {
  return std::make_unique<ClockMarks>(std::move(now_us));
}

}  // namespace dp::metrics
