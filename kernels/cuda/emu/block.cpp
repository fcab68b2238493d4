#include "kernels/cuda/emu/block.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <tuple>
#include <utility>

#include "kernels/cuda/emu/errors.h"
#include "kernels/cuda/emu/options.h"

namespace dp::emu {
namespace {

FiberStacks& stacks() {
  thread_local FiberStacks s DP_EMU_TLS(options().stack_bytes);
  return s;
}

thread_local uint64_t t_block_serial DP_EMU_TLS = 0;
thread_local uint64_t t_launch_serial DP_EMU_TLS = 0;

constexpr unsigned char kSharedPoison = 0xFF;  // shared memory starts undefined: NaN in floats

std::string site_string(const std::source_location& s) {
  const char* file = std::strrchr(s.file_name(), '/');
  return fmt::format("{}:{}", file ? file + 1 : s.file_name(), s.line());
}

const char* barrier_name(const EmuThread& t) {
  return t.status == ThreadStatus::AtBarrier ? "__syncthreads" : warp_op_name(t.op.kind);
}

}  // namespace

const char* warp_op_name(WarpOpKind k) {
  switch (k) {
    case WarpOpKind::ShflIdx: return "__shfl_sync";
    case WarpOpKind::ShflUp: return "__shfl_up_sync";
    case WarpOpKind::ShflDown: return "__shfl_down_sync";
    case WarpOpKind::ShflXor: return "__shfl_xor_sync";
    case WarpOpKind::Ballot: return "__ballot_sync";
    case WarpOpKind::Any: return "__any_sync";
    case WarpOpKind::All: return "__all_sync";
    case WarpOpKind::SyncWarp: return "__syncwarp";
  }
  return "?";
}

std::string coords_string(uint3 v) { return fmt::format("({},{},{})", v.x, v.y, v.z); }

BlockRunner& running_block(const char* what) {
  if (t_block == nullptr || Fiber::current() == nullptr) {
    std::fprintf(stderr, "dp cuda emu: %s called outside a kernel launch\n", what);
    std::abort();
  }
  return *t_block;
}

BlockRunner::BlockRunner(const LaunchInfo& info, Body body, void* body_arg)
    : info_(info), body_(body), body_arg_(body_arg), launch_serial_(++t_launch_serial),
      racecheck_(racecheck_enabled()) {
  const unsigned n = info.block.x * info.block.y * info.block.z;
  threads_.resize(n);
  for (unsigned i = 0; i < n; ++i) {
    threads_[i].linear = i;
    threads_[i].idx = uint3{i % info.block.x, i / info.block.x % info.block.y, i / (info.block.x * info.block.y)};
  }
  // Exactly the requested bytes on the heap: ASan catches a kernel overrunning them.
  void* p = nullptr;
  if (info.dynamic_shared > 0 && posix_memalign(&p, 16, info.dynamic_shared) != 0) std::abort();
  dynamic_shared_ = static_cast<unsigned char*>(p);
  outer_ = t_block;
  t_block = this;
}

BlockRunner::~BlockRunner() {
  std::free(dynamic_shared_);
  t_block = outer_;
}

bool BlockRunner::run(uint3 b) {
  block_serial_ = ++t_block_serial;
  barrier_gen_ = 1;
  exited_ = 0;
  warp_collectives_ = false;
  t_coords = Coords{uint3{0, 0, 0}, b, info_.block, info_.grid};
  if (dynamic_shared_) std::memset(dynamic_shared_, kSharedPoison, info_.dynamic_shared);
  for (EmuThread& t : threads_) {  // each starts at its first run
    t.status = ThreadStatus::Ready;
    t.warp_epoch = 0;
    t.fiber = nullptr;
  }
  const unsigned n = size();
  while (exited_ < n) {
    bool ran = false;
    for (unsigned i = 0; i < n; ++i) {
      if (threads_[i].status != ThreadStatus::Ready) continue;
      ran = true;
      i = run_thread(threads_[i]);  // the sweep goes on after the last thread that fiber ran
      if (!fault_.empty()) return stop_on_fault();
    }
    if (!ran && !open_barrier()) return stop_on_fault();
  }
  return true;
}

// Unwinds every started, unfinished thread (its wait throws FiberAbort), records the fault.
bool BlockRunner::stop_on_fault() {
  aborting_ = true;
  for (EmuThread& t : threads_)
    if (t.fiber != nullptr) run_thread(t);  // waiting: its wait throws FiberAbort
  aborting_ = false;
  record_fault(fault_);
  fault_.clear();
  return false;
}

Fiber* BlockRunner::acquire_fiber() {
  if (free_fibers_.empty()) return fibers_.emplace_back(std::make_unique<Fiber>()).get();
  Fiber* f = free_fibers_.back();
  free_fibers_.pop_back();
  return f;
}

// Resumes t (starting a fiber for it if it has none) until its fiber suspends or finishes;
// returns the linear index of the thread that fiber ran last (t, or a later one it went on with).
unsigned BlockRunner::run_thread(EmuThread& t) {
  if (t.fiber == nullptr) {
    t.fiber = acquire_fiber();
    t.fiber->start(stacks().acquire(), &BlockRunner::thread_main, this);
  }
  Fiber* f = t.fiber;
  t.status = ThreadStatus::Running;
  t_coords.thread_idx = t.idx;
  running_ = &t;
  f->resume();
  EmuThread& last = *running_;
  running_ = nullptr;
  if (f->finished()) {
    stacks().release(f->take_stack());
    free_fibers_.push_back(f);
    last.fiber = nullptr;
  }
  return last.linear;
}

// A fiber's work: the running thread, then each following thread that has not started yet, until
// one waits (the fiber then stays with it) or none is left to start.
void BlockRunner::thread_main(void* self) {
  auto* block = static_cast<BlockRunner*>(self);
  for (EmuThread* t = &block->self();;) {
    block->run_body(*t);
    EmuThread* next = block->next_unstarted(*t);
    if (next == nullptr) return;
    next->fiber = std::exchange(t->fiber, nullptr);
    next->status = ThreadStatus::Running;
    t_coords.thread_idx = next->idx;
    block->running_ = t = next;
  }
}

void BlockRunner::run_body(EmuThread& t) {
  try {
    body_(body_arg_);
    check_exit_leaves_no_waiter(t);
  } catch (const FiberAbort&) {
    // unwound: the block faulted
  } catch (const std::exception& e) {
    fault_ = where(t) + ": the kernel threw: " + e.what();
  } catch (...) {
    fault_ = where(t) + ": the kernel threw a non-standard exception";
  }
  t.status = ThreadStatus::Exited;
  ++exited_;
}

// The thread after t if it has not started (it is then Ready, and the sweep would run it next);
// none after a fault.
EmuThread* BlockRunner::next_unstarted(const EmuThread& t) {
  if (!fault_.empty() || aborting_) return nullptr;
  EmuThread* next = thread(t.linear + 1);
  return next != nullptr && next->fiber == nullptr && next->status == ThreadStatus::Ready ? next : nullptr;
}

// A lane that exits while lanes of its warp wait for it in a collective: they would wait forever
// (on a GPU: undefined behaviour, in practice a hang or garbage).
void BlockRunner::check_exit_leaves_no_waiter(const EmuThread& t) {
  if (!warp_collectives_) return;  // no lane can be waiting
  const unsigned lane = t.linear % 32, warp0 = t.linear - lane;
  for (unsigned l = 0; l < 32; ++l) {
    const EmuThread* o = thread(warp0 + l);
    if (o && o->status == ThreadStatus::AtWarp && (o->op.mask >> lane & 1u))
      fail(fmt::format("it exited while lane {} (thread {}) waits for it in {}(mask 0x{:08x}) at {}: every lane "
                       "named in a mask must reach the same collective",
                       l, coords_string(o->idx), warp_op_name(o->op.kind), o->op.mask, site_string(o->site)));
  }
}

int BlockRunner::barrier(BarrierKind kind, int pred, std::source_location site) {
  EmuThread& t = self();
  t.status = ThreadStatus::AtBarrier;
  t.site = site;
  t.barrier_arg = pred != 0;
  wait();
  const int count = t.barrier_arg;
  switch (kind) {
    case BarrierKind::Plain: return 0;
    case BarrierKind::Count: return count;
    case BarrierKind::And: return count == static_cast<int>(size());
    case BarrierKind::Or: return count > 0;
  }
  return 0;
}

void BlockRunner::wait() {
  running_->fiber->suspend();
  if (aborting_) throw FiberAbort{};
  running_->status = ThreadStatus::Running;  // made Ready by the one that released it, now resumed
}

// No thread is ready. Opens the barrier if all threads wait at the same __syncthreads; otherwise
// the block is stuck: records why and returns false.
bool BlockRunner::open_barrier() {
  const EmuThread& first = threads_[0];
  bool all_at_barrier = exited_ == 0, same_site = true;
  int count = 0;
  for (const EmuThread& t : threads_) {
    all_at_barrier = all_at_barrier && t.status == ThreadStatus::AtBarrier;
    same_site = same_site && t.site.line() == first.site.line() &&
                (t.site.file_name() == first.site.file_name() ||
                 std::strcmp(t.site.file_name(), first.site.file_name()) == 0);
    count += t.barrier_arg;
  }
  if (!all_at_barrier || !same_site) {
    fault_ = fmt::format("{}: {}: {}", where(),
                         all_at_barrier ? "divergent __syncthreads (threads wait at different barriers)"
                                        : "deadlock (a barrier or warp collective that can never complete)",
                         describe_stuck());
    return false;
  }
  ++barrier_gen_;
  for (EmuThread& t : threads_) {
    t.status = ThreadStatus::Ready;
    t.barrier_arg = count;  // how many threads passed a true predicate (__syncthreads_count & co)
  }
  return true;
}

// "N threads wait at __syncthreads at f.cu:12 (first: thread (0,0,0)); M threads exited (first:
// thread (128,0,0))": the block's threads grouped by where they are.
std::string BlockRunner::describe_stuck() const {
  std::map<std::tuple<int, std::string, std::string>, std::pair<int, uint3>> groups;
  for (const EmuThread& t : threads_) {
    std::string what = t.status == ThreadStatus::Exited ? "exited" : std::string("wait at ") + barrier_name(t);
    if (t.status == ThreadStatus::AtWarp) what += fmt::format("(mask 0x{:08x})", t.op.mask);
    const std::string at = t.status == ThreadStatus::Exited ? "" : " at " + site_string(t.site);
    auto [it, fresh] = groups.try_emplace({static_cast<int>(t.status), what, at}, 0, t.idx);
    ++it->second.first;
  }
  std::string out;
  for (const auto& [key, v] : groups) {
    const auto& [status, what, at] = key;
    out += fmt::format("{}{} thread{} {}{} (first: thread {})", out.empty() ? "" : "; ", v.first,
                       v.first == 1 ? "" : "s", what, at, coords_string(v.second));
  }
  return out;
}

std::string BlockRunner::where() const {
  const char* file = std::strrchr(info_.file, '/');
  return fmt::format("kernel {} (launched at {}:{}), block {}", info_.kernel, file ? file + 1 : info_.file,
                     info_.line, coords_string(t_coords.block_idx));
}

std::string BlockRunner::where(const EmuThread& t) const { return where() + ", thread " + coords_string(t.idx); }

void BlockRunner::fail(const std::string& what) {
  if (running_ == nullptr) {
    std::fprintf(stderr, "dp cuda emu: fault outside a CUDA thread: %s\n", what.c_str());
    std::abort();
  }
  if (fault_.empty()) fault_ = where(*running_) + ": " + what;
  throw FiberAbort{};
}

}  // namespace dp::emu
