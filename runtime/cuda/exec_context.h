// defines: cuda::ExecContext, what one process needs to run layers on its GPU: the compute,
// data (host-to-device input) and communication streams, the cuDNN, cuBLAS and cuBLASLt
// handles bound to the compute stream, a bounded scratch workspace for library calls, which
// cuDNN API the convolutions use (train.cudnn_api), and the graph-API plans chosen with its handle.
//
// One per process, made by the trainer once the device is chosen; layers reach it through
// StepContext::gpu. Every layer launches on compute(); nothing uses the legacy default stream.
#pragma once
#include <cstddef>

#include "runtime/cuda/buffers.h"
#include "runtime/cuda/cudnn_api.h"
#include "runtime/cuda/graph_candidates.h"
#include "runtime/cuda/handles.h"
#include "runtime/cuda/stream.h"
#include "runtime/precision.h"

namespace dp::cuda {

class GraphPlan;  // runtime/cuda/cudnn_graph.h

class ExecContext {
 public:
  // Makes `device` current, configures its memory pool (runtime/cuda/memory_pool.h) and creates
  // the streams and handles. workspace_limit: the most scratch memory one cuDNN/cuBLASLt call may
  // use (algorithms needing more are not chosen).
  ExecContext(int device, size_t workspace_limit_bytes);
  ExecContext(const ExecContext&) = delete;
  ExecContext& operator=(const ExecContext&) = delete;

  int device() const { return device_; }
  cudaStream_t compute() const { return compute_.get(); }
  cudaStream_t data() const { return data_.get(); }
  cudaStream_t comm() const { return comm_.get(); }
  cudnnHandle_t cudnn() const { return cudnn_.get(); }
  cublasHandle_t cublas() const { return cublas_.get(); }
  cublasLtHandle_t cublaslt() const { return cublaslt_.get(); }

  size_t workspace_limit() const { return workspace_limit_; }
  // train.tf32: where f32 data may use TF32 tensor cores (runtime/precision.h). Off unless set:
  // the convolutions (models/layers/conv2d: cuDNN math type and algorithm cache key; any other
  // convolution path reads it here too) and cuBLASLt matmuls (compute type and heuristic key)
  // follow it.
  Tf32 tf32() const { return tf32_; }
  void set_tf32(Tf32 t) { tf32_ = t; }
  // Scratch memory of at least `bytes` (<= workspace_limit()) for work on the compute stream,
  // valid until the next call (it grows in stream order; the old block is freed on compute()).
  void* workspace(size_t bytes) { return workspace(bytes, workspace_limit_); }
  // The same for a call whose own limit is `limit` (runtime/cuda/graph_plan_key.h
  // plan_workspace_limit: the deterministic attention backward's need, when above the cap).
  void* workspace(size_t bytes, size_t limit);

  // train.cudnn_api: the API the convolutions run on (Legacy unless set). The graph reads it when
  // it is built, to fold ReLUs into convolutions under Graph (Graph::build), so set it first.
  CudnnApi cudnn_api() const { return cudnn_api_; }
  void set_cudnn_api(CudnnApi api) { cudnn_api_ = api; }

  // The cuDNN graph-API plans chosen on this context (runtime/cuda/cudnn_graph.h): the process's
  // cache, as there is one context per process. It lives here so that the plans, which were built
  // with this context's cuDNN handle, are destroyed before the handle (the members below are
  // destroyed in reverse order); a layer's own reference to a plan must not outlive the context.
  GraphPlanCache<GraphPlan>& graph_plans() { return graph_plans_; }

 private:
  int device_;
  size_t workspace_limit_;
  CudnnApi cudnn_api_ = CudnnApi::Legacy;
  Tf32 tf32_ = Tf32::Off;
  CudaStream compute_, data_, comm_;
  CudnnHandle cudnn_;
  CublasHandle cublas_;
  CublasLtHandle cublaslt_;
  DeviceBuffer workspace_;
  GraphPlanCache<GraphPlan> graph_plans_;
};

}  // namespace dp::cuda
