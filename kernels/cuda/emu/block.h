// defines: BlockRunner, which runs the blocks of one launch on the calling host thread, one
// block at a time, each CUDA thread a fiber; the barrier (__syncthreads) and the fault path
// (fail: kernel, block and thread named, the launch stopped); Coords, the built-in variables of
// the thread that runs now.
//
// Scheduling: the scheduler sweeps the block's threads in linear order (x fastest), resuming
// every ready one until it waits (barrier, warp collective) or exits. A fiber whose thread exits
// goes on with the next thread if that one has not started yet — what the sweep would run next
// anyway — so the threads of a barrier-free kernel cost a function call each, not a fiber; a
// fiber belongs to one thread only from its first wait on. When a sweep finds none
// ready, either every thread waits at the same __syncthreads (the barrier opens) or the block can
// never finish: a thread exited or waits elsewhere (deadlock), or threads wait at different
// __syncthreads (divergent barrier) — a fault, reported instead of hanging.
//
// A fault (found by a CUDA thread, or by the scheduler as above) stops the block: every thread
// that has started is resumed once more and unwound by a FiberAbort exception from its pending
// wait, so its destructors run and its stack is clean for the next block; no later block runs.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <source_location>
#include <string>
#include <vector>

#include "kernels/cuda/emu/fiber.h"
#include "kernels/cuda/emu/types.h"

namespace dp::emu {

// The emulator's own per-host-thread state (in its .cpp files) is read on every switch:
// initial-exec TLS is a plain %fs-relative load, where the general model (what -fPIC gives a
// static library) calls __tls_get_addr, which ASan intercepts. Valid because the emulator is
// linked into executables, never dlopen'ed. Not for the inline variables below: with it, GCC 12
// and UBSan reported a null threadIdx in kernel code after a fiber switch (not pursued further).
#define DP_EMU_TLS __attribute__((tls_model("initial-exec")))

// threadIdx, blockIdx, blockDim, gridDim of the running CUDA thread (kernels/cuda/emu/builtins.h).
struct Coords {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
};
inline thread_local Coords t_coords{};

enum class ThreadStatus : uint8_t { Ready, Running, AtBarrier, AtWarp, Exited };

// Warp collectives (kernels/cuda/emu/warp.h); a lane waits in one with its arguments here.
enum class WarpOpKind : uint8_t { ShflIdx, ShflUp, ShflDown, ShflXor, Ballot, Any, All, SyncWarp };
const char* warp_op_name(WarpOpKind k);

struct WarpOp {
  WarpOpKind kind;
  unsigned mask;
  uint64_t value;   // the lane's operand, as bits
  int arg;          // source lane, delta or lane mask
  int width;
  uint64_t result;  // filled in by the lane that completes the collective
};

struct EmuThread {
  uint3 idx;
  unsigned linear;  // x + y * Dx + z * Dx * Dy: lane = linear % 32, warp = linear / 32
  ThreadStatus status;
  std::source_location site;  // where it waits
  int barrier_arg;            // __syncthreads_count/and/or's predicate, then their result
  WarpOp op;
  uint32_t warp_epoch;        // __syncwarp generations passed (racecheck's order within a warp)
  Fiber* fiber;               // the fiber running it; null before it starts and after it exits
};

enum class BarrierKind : uint8_t { Plain, Count, And, Or };

// One launch's identity, for messages and limits.
struct LaunchInfo {
  std::string kernel;  // as written at the launch site, e.g. "relu_kernel<float>"
  dim3 grid, block;
  size_t dynamic_shared;
  const char* file;
  int line;
};

class BlockRunner {
 public:
  using Body = void (*)(void* arg);  // one CUDA thread's work: calls the kernel
  BlockRunner(const LaunchInfo& info, Body body, void* body_arg);
  ~BlockRunner();
  BlockRunner(const BlockRunner&) = delete;
  BlockRunner& operator=(const BlockRunner&) = delete;

  // Runs block b to its end; false when it faulted (the fault is recorded, see errors.h).
  bool run(uint3 b);

  // From inside a CUDA thread:
  int barrier(BarrierKind kind, int pred, std::source_location site);
  [[noreturn]] void fail(const std::string& what);  // throws FiberAbort
  void wait();  // suspend until another thread makes this one Ready (throws FiberAbort on a fault)
  EmuThread& self() { return *running_; }
  EmuThread* thread(unsigned linear) { return linear < threads_.size() ? &threads_[linear] : nullptr; }
  unsigned size() const { return static_cast<unsigned>(threads_.size()); }
  uint32_t barrier_generation() const { return barrier_gen_; }
  void note_warp_collective() { warp_collectives_ = true; }
  uint64_t block_serial() const { return block_serial_; }
  uint64_t launch_serial() const { return launch_serial_; }
  unsigned char* dynamic_shared() { return dynamic_shared_; }
  const LaunchInfo& info() const { return info_; }
  bool racecheck() const { return racecheck_; }  // DP_EMU_RACECHECK, fixed for the launch
  std::string where() const;                    // "kernel K (file:line), block (..)"
  std::string where(const EmuThread& t) const;  // ... ", thread (..)"

 private:
  static void thread_main(void* self);
  unsigned run_thread(EmuThread& t);
  void run_body(EmuThread& t);
  EmuThread* next_unstarted(const EmuThread& t);
  Fiber* acquire_fiber();
  bool open_barrier();
  bool stop_on_fault();
  std::string describe_stuck() const;
  void check_exit_leaves_no_waiter(const EmuThread& t);

  LaunchInfo info_;
  Body body_;
  void* body_arg_;
  std::vector<EmuThread> threads_;
  std::vector<std::unique_ptr<Fiber>> fibers_;  // made on demand, at most one per thread
  std::vector<Fiber*> free_fibers_;
  EmuThread* running_ = nullptr;
  unsigned exited_ = 0;
  uint32_t barrier_gen_ = 0;
  uint64_t block_serial_ = 0, launch_serial_ = 0;
  unsigned char* dynamic_shared_ = nullptr;
  std::string fault_;
  bool aborting_ = false;
  bool warp_collectives_ = false;  // any in this block yet (else no exit can leave a lane waiting)
  bool racecheck_ = false;
  BlockRunner* outer_ = nullptr;
};

// Thrown into a CUDA thread to unwind it when its block faulted; kernels must not catch it.
struct FiberAbort {};

// The block running on this host thread, or nullptr outside a launch.
inline thread_local BlockRunner* t_block = nullptr;

// The running block, or a fatal "device function called outside a kernel" message naming `what`.
BlockRunner& running_block(const char* what);

std::string coords_string(uint3 v);

}  // namespace dp::emu
