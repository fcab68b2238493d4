// defines: GraphObserver, what Graph::forward and Graph::backward tell a watcher around each node
// they run: the per-layer profile (runtime/metrics/layer_profile.h) records a time mark at each.
//
// begin comes right before the graph prepares a node's inputs and runs its layer, end right after
// the layer and what the graph does for it afterwards (in backward: summing its input gradients
// into their producers', recycling buffers, widening 16-bit gradients), before the "gradients
// ready" hook that starts the reducer. A ReLU folded into its producer (the CPU's oneDNN plan) is
// not run, so it gets neither call: its time is its producer's.
#pragma once

namespace dp {

class GraphObserver {
 public:
  virtual ~GraphObserver() = default;
  virtual void node_begin(int node, bool backward) = 0;
  virtual void node_end(int node, bool backward) = 0;
};

}  // namespace dp
