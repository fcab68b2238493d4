// defines: Communicator, the interface every collectives backend implements, and
// SingleProcessCommunicator (world size 1), the backend of a one-process run.
#pragma once
#include <memory>

#include "runtime/tensor.h"

namespace dp {

enum class ReduceOp { Sum, Avg, Max, Min };

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In place, blocking (the asynchronous work-item API arrives with the ring/NCCL backends).
  virtual void allreduce(Tensor& t, ReduceOp op) = 0;
  virtual void broadcast(Tensor& t, int root) = 0;
  virtual void barrier() = 0;
};

// One process: every collective is the identity on its buffer.
class SingleProcessCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void allreduce(Tensor&, ReduceOp) override {}
  void broadcast(Tensor&, int root) override { DP_CHECK(root == 0, "broadcast root {} in a world of 1", root); }
  void barrier() override {}
};

}  // namespace dp
