#include "kernels/cuda/emu/warp.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace dp::emu {
namespace {

constexpr unsigned kWarp = 32;

// Called for every lane of every collective: the file names of one call site are one pointer, so
// strcmp (slow under ASan, which intercepts it) runs only when they differ.
bool same_site(const std::source_location& a, const std::source_location& b) {
  return a.line() == b.line() && a.column() == b.column() &&
         (a.file_name() == b.file_name() || std::strcmp(a.file_name(), b.file_name()) == 0);
}

// The lane whose value `lane` receives, per PTX shfl.sync: the warp splits into segments of
// `width` lanes; a source outside the lane's segment (up, down) or past it (xor) gives the
// lane its own value.
unsigned source_lane(WarpOpKind kind, unsigned lane, int arg, int width) {
  const unsigned seg = kWarp - static_cast<unsigned>(width);  // PTX's segmask: high lane bits
  const unsigned b = static_cast<unsigned>(arg) & 31u;
  const int min_lane = static_cast<int>(lane & seg);
  const int max_lane = static_cast<int>((lane & seg) | (31u & ~seg));
  int j = static_cast<int>(lane);
  bool ok = true;
  switch (kind) {
    case WarpOpKind::ShflIdx: j = min_lane | static_cast<int>(b & ~seg); ok = j <= max_lane; break;
    case WarpOpKind::ShflUp: j = static_cast<int>(lane) - static_cast<int>(b); ok = j >= min_lane; break;
    case WarpOpKind::ShflDown: j = static_cast<int>(lane + b); ok = j <= max_lane; break;
    case WarpOpKind::ShflXor: j = static_cast<int>(lane ^ b); ok = j <= max_lane; break;
    default: break;
  }
  return ok ? static_cast<unsigned>(j) : lane;
}

bool is_shuffle(WarpOpKind k) {
  return k == WarpOpKind::ShflIdx || k == WarpOpKind::ShflUp || k == WarpOpKind::ShflDown || k == WarpOpKind::ShflXor;
}

// The checks of the calling lane's own arguments, and of each lane its mask names.
void check_mask(BlockRunner& b, const EmuThread& me, WarpOpKind kind, unsigned mask, int width) {
  const unsigned lane = me.linear % kWarp, warp0 = me.linear - lane;
  const char* name = warp_op_name(kind);
  if (!(mask >> lane & 1u))
    b.fail(fmt::format("{}(mask 0x{:08x}) called by lane {}, which its mask does not name", name, mask, lane));
  if (is_shuffle(kind) && (width < 1 || width > 32 || (width & (width - 1)) != 0))
    b.fail(fmt::format("{} width {} is not a power of two in [1, 32]", name, width));
  for (unsigned l = 0; l < kWarp; ++l) {
    if (!(mask >> l & 1u)) continue;
    const EmuThread* o = b.thread(warp0 + l);
    if (o == nullptr)
      b.fail(fmt::format("{}(mask 0x{:08x}) names lane {}, which does not exist: the block has {} threads, so "
                         "its last warp has {} lanes",
                         name, mask, l, b.size(), b.size() - warp0));
    if (o->status == ThreadStatus::Exited)
      b.fail(fmt::format("{}(mask 0x{:08x}) names lane {} (thread {}), which has exited (an inactive lane)", name,
                         mask, l, coords_string(o->idx)));
    if (o->status == ThreadStatus::AtWarp &&
        (o->op.kind != kind || o->op.mask != mask || (kind != WarpOpKind::SyncWarp && !same_site(o->site, me.site))))
      b.fail(fmt::format("{}(mask 0x{:08x}) at {}:{} while lane {} (thread {}) waits in {}(mask 0x{:08x}) at "
                         "{}:{}: the lanes of a mask must reach the same collective",
                         name, mask, me.site.file_name(), me.site.line(), l, coords_string(o->idx),
                         warp_op_name(o->op.kind), o->op.mask, o->site.file_name(), o->site.line()));
  }
}

// Every lane of the mask has arrived: computes each one's result and releases the others.
void complete(BlockRunner& b, EmuThread& me, unsigned mask) {
  const unsigned warp0 = me.linear - me.linear % kWarp;
  const WarpOp op = me.op;
  uint64_t word = 0;  // ballot/any/all: which lanes' predicates are true
  for (unsigned l = 0; l < kWarp; ++l)
    if (mask >> l & 1u) word |= (b.thread(warp0 + l)->op.value != 0 ? 1ull : 0ull) << l;
  uint32_t epoch = 0;
  for (unsigned l = 0; l < kWarp; ++l)
    if (mask >> l & 1u) epoch = std::max(epoch, b.thread(warp0 + l)->warp_epoch);
  for (unsigned l = 0; l < kWarp; ++l) {
    if (!(mask >> l & 1u)) continue;
    EmuThread& t = *b.thread(warp0 + l);
    switch (op.kind) {
      case WarpOpKind::Ballot: t.op.result = word; break;
      case WarpOpKind::Any: t.op.result = word != 0; break;
      case WarpOpKind::All: t.op.result = word == mask; break;
      case WarpOpKind::SyncWarp: t.op.result = 0; t.warp_epoch = epoch + 1; break;
      default: {
        const unsigned src = source_lane(op.kind, l, t.op.arg, op.width);
        if (!(mask >> src & 1u))
          b.fail(fmt::format("{}(mask 0x{:08x}): lane {} reads lane {}, which the mask does not name (its value "
                             "is undefined on a GPU)",
                             warp_op_name(op.kind), mask, l, src));
        t.op.result = b.thread(warp0 + src)->op.value;
      }
    }
    if (&t != &me) t.status = ThreadStatus::Ready;
  }
}

}  // namespace

uint64_t warp_collective(WarpOpKind kind, unsigned mask, uint64_t value, int arg, int width,
                         std::source_location site) {
  BlockRunner& b = running_block(warp_op_name(kind));
  EmuThread& me = b.self();
  b.note_warp_collective();
  me.site = site;
  check_mask(b, me, kind, mask, width);
  me.op = WarpOp{kind, mask, value, arg, width, 0};
  me.status = ThreadStatus::AtWarp;
  const unsigned warp0 = me.linear - me.linear % kWarp;
  bool all_here = true;
  for (unsigned l = 0; l < kWarp && all_here; ++l)
    if (mask >> l & 1u) all_here = b.thread(warp0 + l)->status == ThreadStatus::AtWarp;
  if (all_here) {
    complete(b, me, mask);
    me.status = ThreadStatus::Running;
  } else {
    b.wait();
  }
  return me.op.result;
}

}  // namespace dp::emu

unsigned __activemask() {
  dp::emu::BlockRunner& b = dp::emu::running_block("__activemask");
  const unsigned warp0 = b.self().linear - b.self().linear % 32;
  unsigned mask = 0;
  for (unsigned l = 0; l < 32; ++l) {
    const dp::emu::EmuThread* t = b.thread(warp0 + l);
    if (t && t->status != dp::emu::ThreadStatus::Exited) mask |= 1u << l;
  }
  return mask;
}
