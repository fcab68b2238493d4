// defines: LayerProfiler, the per-layer profile of profile.layers = "A-B": for steps A..B each
// layer's forward and backward time, the loss, the optimizer step, the reducer's exposed wait,
// the data wait and the whole step; LayerProfile, its means, and what reports them: layer_table
// (the log's table), layers_json (<run>/layers.json), layer_trace_events (trace.json's "device"
// lane).
//
// The step is one timeline of marks (mark_source.h: a clock on the CPU, CUDA events on the
// compute stream on a GPU). Each mark starts a phase that lasts until the next mark: a layer's
// forward or backward (the graph's observer calls, graph_observer.h), the loss, the optimizer,
// the comm wait, the data wait (the trainer's begin() calls), or unattributed time (end(): what
// lies between them, e.g. zero_grad, the graph's layout changes and output cast, the reducer's
// bucket launches, the buffer broadcast). The step is the time from its first mark to its last,
// so the phases tile it and
//
//   step_ms = sum over layers (fwd_ms + bwd_ms) + loss_ms + optimizer_ms + comm_wait_ms
//             + data_wait_ms + unattributed_ms
//
// holds by construction (unattributed_ms is computed as the step minus the rest). On a GPU every
// phase, the waits included, is device time on the compute stream: the data wait is how long the
// stream stood idle for the batch (the host's wait for the loader plus the copy it waits on), the
// comm wait how long it waited for the all-reduces after backward.
//
// Use (the trainer; outside the window every call is a cheap no-op):
//
//   metrics::LayerProfiler prof(window, metrics::clock_marks(), step_mark_bound(nodes, accum));
//   graph.set_observer(&prof);
//   prof.begin_step(step);  prof.begin(Phase::DataWait); ...; prof.end();  ...
//   if (prof.end_step()) { LayerProfile p = prof.finish(node_infos(graph), "cpu", "fp32", "f32"); ... }
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/shape.h"
#include "runtime/graph_observer.h"
#include "launch/telemetry/mark_source.h"
#include "launch/telemetry/step_range.h"
#include "launch/telemetry/trace.h"

namespace dp {
class Graph;
}

namespace dp::metrics {

enum class Phase : uint8_t { Unattributed, Forward, Backward, Loss, Optimizer, CommWait, DataWait };

// What the report says about one graph node (node_infos reads them from a built graph).
struct NodeInfo {
  std::string name, type;  // "layer1.0.conv1", "conv2d"
  Shape out_shape;         // per sample
  int folded_into = -1;    // applied by this earlier node (a ReLU or add folded by the CPU or GPU plan): no row of its own
};
std::vector<NodeInfo> node_infos(const Graph& g);

// An upper bound on one step's marks: the step's two, per micro-batch data and loss (two each)
// and every node's forward and backward (two each), the comm wait and the optimizer.
size_t step_mark_bound(size_t nodes, int64_t micro_batches);

// One phase of one step, in ms after the window's first mark (unattributed phases left out).
struct ProfileSpan {
  int64_t step = 0;
  Phase phase = Phase::Unattributed;
  int node = -1;     // Forward and Backward
  std::string name;  // "conv1" (the layer), "loss", "optimizer", "comm wait", "data wait"
  double begin_ms = 0, dur_ms = 0;
};

// A row of the table: a layer, with the nodes folded into it. Times are means per step.
struct LayerRow {
  std::string name, type;
  Shape out_shape;
  std::vector<std::string> fused;
  double fwd_ms = 0, bwd_ms = 0;
};

struct LayerProfile {
  int64_t first = 0, last = 0, steps = 0;  // the steps recorded: first..last
  std::string device;                      // "cpu", "cuda:0"
  std::string precision;                   // "fp32", "bf16", "fp16"
  std::string dtype;                       // the activations': "f32", "bf16", "f16"
  // Means per step.
  double step_ms = 0;
  std::vector<LayerRow> layers;  // fwd_ms + bwd_ms descending, ties by name
  double loss_ms = 0, optimizer_ms = 0, comm_wait_ms = 0, data_wait_ms = 0, unattributed_ms = 0;
  double origin_us = 0;            // wall-clock microseconds of the first mark
  std::vector<ProfileSpan> spans;  // every attributed phase of every step, in order
};

class LayerProfiler final : public GraphObserver {
 public:
  // marks may be null when the window is empty (nothing is ever recorded). marks_per_step bounds
  // one step's marks (step_mark_bound): the GPU makes that many events per step before the window.
  LayerProfiler(StepRange window, std::unique_ptr<MarkSource> marks, size_t marks_per_step);

  // Steps count from 1. A step inside the window (the first one: its first step, or a later one
  // for a run resumed inside it) opens the mark source, then marks the step's start.
  void begin_step(int64_t step);
  // Inside a recorded step: the phase starts now (node: the layer of Forward and Backward).
  void begin(Phase phase, int node = -1);
  void end() { begin(Phase::Unattributed); }
  // Marks the step's end; true when it was the window's last step (time to finish()).
  bool end_step();
  bool recording() const { return in_step_; }
  // Steps were recorded and not yet reported (finish() is due, e.g. a run that ended inside the window).
  bool pending() const { return steps_ > 0 && !finished_; }
  bool finished() const { return finished_; }
  const StepRange& window() const { return window_; }

  // After the window: every mark's time (the GPU's one host wait), aggregated into means per
  // recorded step. Records nothing afterwards.
  LayerProfile finish(const std::vector<NodeInfo>& nodes, const std::string& device, const std::string& precision,
                      const std::string& dtype);

  void node_begin(int node, bool backward) override { begin(backward ? Phase::Backward : Phase::Forward, node); }
  void node_end(int, bool) override { end(); }

 private:
  enum class Kind : uint8_t { Open, Switch, Close };  // a step's first mark, a phase change, its last
  struct Mark {
    int64_t step;
    Kind kind;
    Phase phase;
    int node;
  };
  void mark(Kind kind, Phase phase, int node);
  StepRange window_;
  std::unique_ptr<MarkSource> marks_;
  size_t marks_per_step_;
  std::vector<Mark> log_;
  bool opened_ = false, in_step_ = false, finished_ = false;
  int64_t step_ = 0, first_ = 0, last_ = 0, steps_ = 0;
};

// The log's table: a title line, one row per layer (rank, name with " +<node>" for each folded node,
// type, per-sample output shape, dtype, forward ms, backward ms, share of the step), then the
// accounting (all layers forward, backward, loss, optimizer, comm wait, data wait, unattributed,
// step: ms and share). No trailing newline.
std::string layer_table(const LayerProfile& p);

// <run>/layers.json (one line):
//   {"steps": [A, B], "device": "cpu", "precision": "fp32", "step_ms": ..,
//    "layers": [{"name": .., "type": .., "out_shape": [..], "fwd_ms": .., "bwd_ms": .., "fused": [..]}, ...],
//    "other": {"loss_ms": .., "optimizer_ms": .., "comm_wait_ms": .., "data_wait_ms": .., "unattributed_ms": ..}}
// layers in the table's order. Tests outside the project read it: these names stay.
std::string layers_json(const LayerProfile& p);

// The spans of the steps inside trace_window as trace events on `lane` (wall-clock microseconds:
// origin_us + the span's offset): "conv1" with cat "forward" or "backward", "loss", "optimizer",
// "comm wait", "data wait" with cat "step".
std::vector<TraceEvent> layer_trace_events(const LayerProfile& p, StepRange trace_window, int lane);

}  // namespace dp::metrics
