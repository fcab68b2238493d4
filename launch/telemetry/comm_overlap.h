// defines: summarise_overlap, how much communication time was hidden behind computation and
// how much was exposed (the step waited for it), from the intervals of each step.
//
// Per step: comm = the length of the union of the communication intervals (overlapping bucket
// all-reduces count once), hidden = the length of (union comm) ∩ (union compute), exposed =
// comm - hidden. Exposed time is what a faster network or better overlap would save: with
// overlap on, the buckets reduced during backward are hidden, the last bucket's reduction (and
// anything after backward) is exposed. Pure functions of the intervals, so the trainer can
// collect them any way it likes: one step at a time, summed at the end of the run:
//
//   metrics::OverlapSummary total;
//   total += metrics::step_overlap({.compute = {{fwd0, fwd1}, {bwd0, bwd1}, {opt0, opt1}},
//                                   .comm = bucket_intervals});
//   log::get("train")->info("{}", metrics::format_overlap(total));   // at the end
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dp::metrics {

struct Interval {
  double begin_us = 0, end_us = 0;  // [begin, end); an interval with end <= begin is empty
};

struct StepTimeline {
  std::vector<Interval> compute;  // forward, backward, optimizer (any order, may overlap)
  std::vector<Interval> comm;     // bucket all-reduces (any order, may overlap)
};

struct OverlapSummary {
  int64_t steps = 0;
  double compute_us = 0;  // union of compute intervals, summed over steps
  double comm_us = 0;     // union of comm intervals, summed over steps
  double hidden_us = 0;   // comm time while compute ran
  double exposed_us = 0;  // comm time while no compute ran (comm_us - hidden_us)
  OverlapSummary& operator+=(const OverlapSummary& o);
};

// One step's numbers (steps = 1).
OverlapSummary step_overlap(const StepTimeline& step);
// The sum over steps.
OverlapSummary summarise_overlap(const std::vector<StepTimeline>& steps);

// One line, per-step means in milliseconds, e.g.
// "communication over 10 steps: 12.500 ms/step, 9.000 hidden behind compute (72.0%), 3.500 exposed; compute 40.000 ms/step"
// or "communication over 10 steps: none" when there was no communication.
std::string format_overlap(const OverlapSummary& s);

}  // namespace dp::metrics
