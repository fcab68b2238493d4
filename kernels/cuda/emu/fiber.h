// defines: Fiber, a stackful coroutine on its own stack (Boost.Context's fcontext switch), and
// FiberStacks, the reusable stacks of one host thread's fibers. The emulator runs each CUDA
// thread of a block as a fiber: a barrier or a warp collective suspends it, the block's scheduler
// (on the host thread's own stack) resumes the next one. One host thread, no locks, a switch is
// a few nanoseconds (ucontext's swapcontext makes a system call per switch).
//
// Under AddressSanitizer every switch is announced (__sanitizer_start/finish_switch_fiber), or
// ASan takes the jump to another stack for a stack overflow. A fiber must run to its end before
// its stack is reused (BlockRunner unwinds the fibers of a faulted block), so no stale frame is
// left on a stack.
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

namespace dp::emu {

// Stacks of `bytes` each, mmap'ed with a guard page below (an overflow faults instead of
// corrupting the neighbour), kept for the life of the host thread and reused by every launch.
// A fiber takes a stack when it starts and gives it back when it finishes, most recent first:
// the threads of a barrier-free kernel run one after another on one stack that stays in cache,
// and only threads that wait at the same time (a barrier, a warp collective) need one each.
class FiberStacks {
 public:
  struct Stack {
    char* base = nullptr;  // the guard page; usable memory is [base + page, base + page + size)
    size_t size = 0;
    char* bottom() const;
  };
  explicit FiberStacks(size_t bytes);
  ~FiberStacks();
  FiberStacks(const FiberStacks&) = delete;
  FiberStacks& operator=(const FiberStacks&) = delete;
  Stack& acquire();  // a free stack (the last given back), or a new one
  void release(Stack& s);
  size_t bytes() const { return bytes_; }

 private:
  size_t bytes_;
  std::vector<std::unique_ptr<Stack>> stacks_;
  std::vector<Stack*> free_;
};

class Fiber {
 public:
  using Entry = void (*)(void* arg);
  // Prepares the fiber to run entry(arg) on `stack`; it starts at the first resume().
  void start(FiberStacks::Stack& stack, Entry entry, void* arg);
  // The stack of a finished fiber, to give back (the fiber has none afterwards).
  FiberStacks::Stack& take_stack();
  // From the scheduler: runs the fiber until it suspends or finishes.
  void resume();
  // From inside the fiber: back to the scheduler, continuing here at the next resume().
  void suspend();
  bool started() const { return started_; }
  bool finished() const { return finished_; }
  // The fiber that is running now on this host thread (nullptr in the scheduler).
  static Fiber* current();

 private:
  static void trampoline(void* transfer);
  void leave();
  void* ctx_ = nullptr;     // where to resume the fiber
  void* caller_ = nullptr;  // where to return to the scheduler
  FiberStacks::Stack* stack_ = nullptr;
  Entry entry_ = nullptr;
  void* arg_ = nullptr;
  bool started_ = false;
  bool finished_ = false;
  void* fake_stack_ = nullptr;  // ASan's bookkeeping of this fiber's stack
  const void* caller_bottom_ = nullptr;
  size_t caller_size_ = 0;
};

}  // namespace dp::emu
