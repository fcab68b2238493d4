#include "collectives/straggler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dp {

StragglerReport analyse_arrivals(const std::vector<std::vector<double>>& seconds, const std::vector<int32_t>& buckets,
                                 double threshold_ms) {
  StragglerReport rep;
  const int n = static_cast<int>(seconds.size());
  if (n < 2) return rep;
  std::vector<int> last(static_cast<size_t>(n), 0);
  std::vector<double> late_s(static_cast<size_t>(n), 0);
  std::vector<double> skew_sum, skew_count;
  std::vector<double> col(static_cast<size_t>(n));
  for (size_t i = 0; i < buckets.size(); ++i) {
    bool complete = true;
    for (int r = 0; r < n; ++r) {
      col[static_cast<size_t>(r)] = i < seconds[static_cast<size_t>(r)].size() ? seconds[static_cast<size_t>(r)][i]
                                                                             : std::numeric_limits<double>::quiet_NaN();
      complete &= std::isfinite(col[static_cast<size_t>(r)]);
    }
    if (!complete) continue;
    ++rep.collectives;
    const int who = static_cast<int>(std::min_element(col.begin(), col.end()) - col.begin());
    std::vector<double> sorted = col;
    std::sort(sorted.begin(), sorted.end());
    const double median = n % 2 ? sorted[static_cast<size_t>(n / 2)]
                                : 0.5 * (sorted[static_cast<size_t>(n / 2 - 1)] + sorted[static_cast<size_t>(n / 2)]);
    ++last[static_cast<size_t>(who)];
    late_s[static_cast<size_t>(who)] += median - col[static_cast<size_t>(who)];
    const size_t b = static_cast<size_t>(std::max(buckets[i], 0));
    if (skew_sum.size() <= b) skew_sum.resize(b + 1, 0), skew_count.resize(b + 1, 0);
    skew_sum[b] += sorted.back() - sorted.front();
    skew_count[b] += 1;
  }
  for (size_t b = 0; b < skew_sum.size(); ++b)
    rep.bucket_skew_ms.push_back(skew_count[b] > 0 ? 1e3 * skew_sum[b] / skew_count[b]
                                                   : std::numeric_limits<double>::quiet_NaN());
  if (rep.collectives == 0) return rep;
  int best = 0;
  for (int r = 1; r < n; ++r)
    if (last[static_cast<size_t>(r)] > last[static_cast<size_t>(best)] ||
        (last[static_cast<size_t>(r)] == last[static_cast<size_t>(best)] &&
         late_s[static_cast<size_t>(r)] > late_s[static_cast<size_t>(best)]))
      best = r;
  rep.rank = best;
  rep.last_count = last[static_cast<size_t>(best)];
  rep.lateness_ms = 1e3 * late_s[static_cast<size_t>(best)] / rep.last_count;
  rep.flagged = rep.lateness_ms > threshold_ms;
  return rep;
}

StragglerReport StragglerWatch::collect() {
  FlightRecorder* rec = comm_.flight_recorder();
  const int n = comm_.size();
  if (rec == nullptr || n < 2) return {};
  // The bucket all-reduces completed since the last report; every rank issued the same ones,
  // so the same sequence numbers (a rank that no longer remembers one sends NaN for it).
  const uint64_t upto = rec->last_completed();
  std::vector<double> durations;
  std::vector<int32_t> buckets;
  for (const FlightRecord& r : rec->snapshot())
    if (r.seq > last_seq_ && r.seq <= upto && r.tag.bucket >= 0 && r.state == FlightRecord::State::Done) {
      durations.push_back(std::chrono::duration<double>(r.ended - r.started).count());
      buckets.push_back(r.tag.bucket);
    }
  last_seq_ = upto;
  const size_t skip = durations.size() > kMaxSamples ? durations.size() - kMaxSamples : 0;
  buckets.erase(buckets.begin(), buckets.begin() + static_cast<std::ptrdiff_t>(skip));
  std::vector<double> mine(kMaxSamples, std::numeric_limits<double>::quiet_NaN());
  std::copy(durations.begin() + static_cast<std::ptrdiff_t>(skip), durations.end(), mine.begin());
  Tensor in = Tensor::zeros({kMaxSamples}, DType::F64), out = Tensor::zeros({static_cast<int64_t>(n) * kMaxSamples}, DType::F64);
  std::copy(mine.begin(), mine.end(), in.data<double>());
  comm_.allgather(in, out);
  std::vector<std::vector<double>> all(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r)
    all[static_cast<size_t>(r)].assign(out.data<double>() + static_cast<int64_t>(r) * kMaxSamples,
                                       out.data<double>() + static_cast<int64_t>(r) * kMaxSamples + buckets.size());
  return analyse_arrivals(all, buckets, threshold_ms_);
}

}  // namespace dp
