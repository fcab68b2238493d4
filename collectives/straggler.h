// defines: the straggler report: per gradient bucket, how far apart the ranks arrived at its
// all-reduce (arrival skew), and which rank arrived last most often (analyse_arrivals, pure);
// StragglerWatch gathers every rank's measurements (one small allgather per report).
//
// Measured without synchronised clocks: an all-reduce ends at about the same moment on every
// rank (nobody has the result before the last rank's data is in), so a rank's time in it, from
// the moment its executor started it (when it was issued, or when the previous collective ended)
// to the end, is that common end minus its own arrival. The rank with the shortest time arrived
// last; its lateness is the median time minus its own (how much later than the typical rank it
// came), and the skew of one all-reduce is the longest time minus the shortest. The flight
// recorder (flight_recorder.h) already keeps those start and end times, so measuring costs
// nothing extra; a report costs one allgather of at most kMaxSamples doubles per rank.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/communicator.h"

namespace dp {

struct StragglerReport {
  int collectives = 0;                    // bucket all-reduces measured (on every rank)
  std::vector<double> bucket_skew_ms;     // [bucket]: mean arrival skew; NaN for a bucket not seen
  int rank = -1;                          // arrived last most often (-1: no measurement)
  int last_count = 0;                     // how often
  double lateness_ms = 0;                 // its mean lateness when it was last
  bool flagged = false;                   // lateness_ms > the threshold
};

// Pure. seconds[r][i]: rank r's time in the i-th measured all-reduce (NaN: not measured on that
// rank; that all-reduce is left out), buckets[i] its bucket. Ties for the most frequent last
// arrival go to the larger total lateness, then to the lower rank.
StragglerReport analyse_arrivals(const std::vector<std::vector<double>>& seconds, const std::vector<int32_t>& buckets,
                                 double threshold_ms);

class StragglerWatch {
 public:
  static constexpr int kMaxSamples = 256;  // the most recent bucket all-reduces of a report
  // threshold_ms: the lateness above which the report names the straggler.
  StragglerWatch(Communicator& comm, double threshold_ms) : comm_(comm), threshold_ms_(threshold_ms) {}
  // Collective (every rank, at the same point; nothing when the backend keeps no flight
  // recorder or runs one rank): the bucket all-reduces completed since the last call.
  StragglerReport collect();

 private:
  Communicator& comm_;
  double threshold_ms_;
  uint64_t last_seq_ = 0;
};

}  // namespace dp
