#include "kernels/cuda/emu/racecheck.h"

namespace dp::emu {
namespace {

// Whether access a (by another or the same thread) happens before `me` in CUDA's order.
bool ordered(const Access& a, const Accessor& me) {
  if (a.block != me.block || a.thread == me.thread) return true;
  if (a.generation < me.generation) return true;
  return a.thread / 32 == me.thread / 32 && a.warp_epoch < me.warp_epoch;
}

Access stamp(const Accessor& me) { return Access{me.block, me.thread, me.generation, me.warp_epoch}; }

}  // namespace

Hazard race_on_read(RaceCell& c, const Accessor& me) {
  if (c.write.block != me.block) return Hazard{"uninitialized read", me.thread, false};
  if (!ordered(c.write, me)) return Hazard{"read-after-write", c.write.thread, true};
  if (c.read1.block == me.block && c.read1.thread == me.thread) {
    c.read1 = stamp(me);
  } else {
    c.read2 = c.read1;
    c.read1 = stamp(me);
  }
  return Hazard{};
}

Hazard race_on_write(RaceCell& c, const Accessor& me) {
  if (c.write.block == me.block && !ordered(c.write, me)) return Hazard{"write-after-write", c.write.thread, true};
  for (const Access* r : {&c.read1, &c.read2})
    if (r->block == me.block && !ordered(*r, me)) return Hazard{"write-after-read", r->thread, false};
  c.write = stamp(me);
  c.read1 = c.read2 = Access{};
  return Hazard{};
}

}  // namespace dp::emu
