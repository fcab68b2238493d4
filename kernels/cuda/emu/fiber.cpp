#include "kernels/cuda/emu/fiber.h"

#include <boost/context/detail/fcontext.hpp>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#if defined(__SANITIZE_ADDRESS__)
#define DP_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DP_EMU_ASAN 1
#endif
#endif

#ifdef DP_EMU_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace ctx = boost::context::detail;

namespace dp::emu {
namespace {

thread_local Fiber* t_current __attribute__((tls_model("initial-exec"))) = nullptr;  // see block.h's DP_EMU_TLS

size_t page_size() {
  static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

// ASan's fiber annotations; nothing without ASan.
void start_switch(void** fake_stack_save, const void* bottom, size_t size) {
#ifdef DP_EMU_ASAN
  __sanitizer_start_switch_fiber(fake_stack_save, bottom, size);
#else
  (void)fake_stack_save, (void)bottom, (void)size;
#endif
}
void finish_switch(void* fake_stack_save, const void** bottom_old, size_t* size_old) {
#ifdef DP_EMU_ASAN
  __sanitizer_finish_switch_fiber(fake_stack_save, bottom_old, size_old);
#else
  (void)fake_stack_save, (void)bottom_old, (void)size_old;
#endif
}

}  // namespace

char* FiberStacks::Stack::bottom() const { return base + page_size(); }

FiberStacks::FiberStacks(size_t bytes) : bytes_((bytes + page_size() - 1) / page_size() * page_size()) {}

FiberStacks::~FiberStacks() {
  for (auto& s : stacks_) munmap(s->base, s->size + page_size());
}

FiberStacks::Stack& FiberStacks::acquire() {
  if (!free_.empty()) {
    Stack* s = free_.back();
    free_.pop_back();
    return *s;
  }
  const size_t total = bytes_ + page_size();
  void* p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    std::fprintf(stderr, "dp cuda emu: cannot map a %zu-byte fiber stack (stack %zu)\n", total, stacks_.size());
    std::abort();
  }
  mprotect(p, page_size(), PROT_NONE);
  stacks_.push_back(std::make_unique<Stack>(Stack{static_cast<char*>(p), bytes_}));
  return *stacks_.back();
}

void FiberStacks::release(Stack& s) { free_.push_back(&s); }

void Fiber::start(FiberStacks::Stack& stack, Entry entry, void* arg) {
  stack_ = &stack;
  entry_ = entry;
  arg_ = arg;
  started_ = false;
  finished_ = false;
  fake_stack_ = nullptr;
  // make_fcontext takes the top of the stack (it grows down) and the usable size.
  ctx_ = ctx::make_fcontext(stack.bottom() + stack.size, stack.size, [](ctx::transfer_t t) {
    Fiber::trampoline(&t);
    static_cast<Fiber*>(t.data)->leave();
  });
}

FiberStacks::Stack& Fiber::take_stack() {
  FiberStacks::Stack* s = stack_;
  stack_ = nullptr;
  return *s;
}

Fiber* Fiber::current() { return t_current; }

void Fiber::resume() {
  started_ = true;
  void* scheduler_fake = nullptr;
  t_current = this;
  start_switch(&scheduler_fake, stack_->bottom(), stack_->size);
  const ctx::transfer_t back = ctx::jump_fcontext(ctx_, this);
  finish_switch(scheduler_fake, nullptr, nullptr);
  t_current = nullptr;
  ctx_ = back.fctx;
}

void Fiber::suspend() {
  start_switch(&fake_stack_, caller_bottom_, caller_size_);
  const ctx::transfer_t t = ctx::jump_fcontext(caller_, nullptr);
  caller_ = t.fctx;
  finish_switch(fake_stack_, &caller_bottom_, &caller_size_);
}

// First entry into the fiber: t holds the scheduler's context and the Fiber. Returns when the
// body has finished; the caller then leaves for good.
void Fiber::trampoline(void* transfer) {
  const auto* t = static_cast<ctx::transfer_t*>(transfer);
  Fiber* self = static_cast<Fiber*>(t->data);
  self->caller_ = t->fctx;
  finish_switch(nullptr, &self->caller_bottom_, &self->caller_size_);
  self->entry_(self->arg_);
  self->finished_ = true;
}

// The fiber's last switch. Nothing on the way may look like a call that never returns (GCC
// infers that from an abort() at the end): ASan would unpoison the whole stack before each such
// call, a 32 KiB memset per CUDA thread.
void Fiber::leave() {
  // A null fake-stack slot tells ASan to drop this fiber's fake stack.
  start_switch(nullptr, caller_bottom_, caller_size_);
  ctx::jump_fcontext(caller_, nullptr);  // never resumed
}

}  // namespace dp::emu
