// defines: GraphObserver, what Graph::forward and Graph::backward tell a watcher around each node
// they run: the per-layer profile (launch/telemetry/layer_profile.h) records a time mark at each.
//
// begin comes right before the graph prepares a node's inputs and runs its layer, end right after
// the layer and what the graph does for it afterwards (in backward: summing its input gradients
// into their producers', recycling buffers, widening 16-bit gradients), before the "gradients
// ready" hook that starts the reducer. A node folded into another (a ReLU under the CPU's oneDNN
// plan; a ReLU or a residual add under the GPU plan) is not run, so it gets neither call: its time
// is its host's. A host with a residual runs, and is reported, at its add's position.
#pragma once

namespace dp {

class GraphObserver {
 public:
  virtual ~GraphObserver() = default;
  virtual void node_begin(int node, bool backward) = 0;
  virtual void node_end(int node, bool backward) = 0;
};

}  // namespace dp
