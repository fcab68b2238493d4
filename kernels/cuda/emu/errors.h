// defines: the emulation build's error state — cudaGetLastError, cudaPeekAtLastError,
// cudaGetErrorString, cudaGetErrorName — and dp::emu's ways to set it: api_error (a runtime call
// refused, with a message on stderr) and record_fault (a kernel the emulator stopped: deadlock,
// bad shuffle mask, shared-memory race, ...).
//
// As in CUDA the last error is per host thread and cudaGetLastError resets it. A kernel fault is
// reported as cudaErrorLaunchFailure by the next cudaGetLastError/PeekAtLastError or by the next
// synchronising call (stream, event or device synchronize, a synchronous copy), whichever comes
// first; unlike CUDA's it is not sticky, so one faulting test does not fail every later one in
// the same process. cudaGetErrorString(cudaErrorLaunchFailure) appends the emulator's message, so
// a CHECK_CUDA that catches the fault names the kernel, the block and the thread.
#pragma once
#include <string>

#include "kernels/cuda/emu/types.h"

cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char* cudaGetErrorString(cudaError_t e);
const char* cudaGetErrorName(cudaError_t e);

namespace dp::emu {

// Records e as the thread's last error, prints "dp cuda emu: <call>: <why>" on stderr, returns e.
cudaError_t api_error(cudaError_t e, const char* call, const std::string& why);

// A kernel launch the emulator stopped: message names kernel, block, thread and the cause.
void record_fault(const std::string& message);

// The pending kernel fault (cudaErrorLaunchFailure, then cleared) or cudaSuccess: what a
// synchronising call returns.
cudaError_t take_pending_fault();

// The message of this thread's latest kernel fault ("" if none yet); tests assert on it.
const std::string& last_fault_message();

}  // namespace dp::emu
