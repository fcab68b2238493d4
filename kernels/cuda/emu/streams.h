// defines: the emulation build's streams and events — create/destroy, synchronize, query,
// wait, record, elapsed time, cudaLaunchHostFunc, cudaDeviceSynchronize — and check_stream, the
// handle check every enqueueing call makes.
//
// Work runs synchronously at enqueue, so every stream is always idle: a synchronize returns at
// once (with a pending kernel fault, see errors.h), an event is complete as soon as it is
// recorded, and its time is the host clock at the record. Handles are registered: a call on a
// destroyed or never-created stream or event fails with cudaErrorInvalidResourceHandle and a
// message (a use-after-destroy that a GPU may or may not catch).
#pragma once
#include "kernels/cuda/emu/types.h"

cudaError_t cudaStreamCreate(cudaStream_t* s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags);
cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned int flags, int priority);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamQuery(cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags = 0);
cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest);
cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void* user_data);
cudaError_t cudaDeviceSynchronize();

cudaError_t cudaEventCreate(cudaEvent_t* e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = 0);
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

namespace dp::emu {
// cudaSuccess for the default, legacy and per-thread streams and for a live created one; else
// cudaErrorInvalidResourceHandle, reported as made by `call`.
cudaError_t check_stream(cudaStream_t s, const char* call);
}  // namespace dp::emu
