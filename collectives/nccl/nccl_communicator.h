// defines: make_nccl_communicator, the Communicator over NCCL for device (CUDA) tensors, one GPU
// per rank. Compiled only in a CUDA build (which also links NCCL); elsewhere
// use make_communicator (collectives/make_communicator.h), which says why there is none.
//
// Setup (collective over the bootstrap): every rank picks its GPU (cuda::choose_local_device: local rank
// mod visible GPUs, or `device` when >= 0), allgathers {host, UUID, PCI bus id} and fails on
// every rank, before any NCCL call, when two ranks would share a GPU (gpu_assignment.h); rank 0
// then makes the ncclUniqueId and broadcasts it through the bootstrap, and every rank joins with
// ncclCommInitRankConfig in non-blocking mode, so that the join too is bounded by timeout_s.
//
// Ordering: a collective runs on the communicator's own stream, after the work already issued
// on the calling thread's per-thread default stream (an event joins them); its Work completes
// when the stream has passed it (so Work::wait() means "the result is in device memory").
// allreduce_stream_async orders after the caller's stream instead (no host wait), and
// stream_wait_collectives(stream) makes a stream wait for every collective issued so far.
// A watcher thread polls, in issue order, the completion event and ncclCommGetAsyncError; an
// asynchronous error, or no completion within timeout_s, aborts the communicator
// (ncclCommAbort) and fails that collective and every later one with an error naming the op and
// sequence number ("nccl allreduce #12 (f32, 1048576 elements, sum) [rank 0/4 on host]: ...").
#pragma once
#include <memory>

#include "collectives/bootstrap/bootstrap.h"
#include "collectives/communicator.h"

namespace dp {

std::unique_ptr<Communicator> make_nccl_communicator(Bootstrap& bs, double timeout_s, int device = -1);

}  // namespace dp
