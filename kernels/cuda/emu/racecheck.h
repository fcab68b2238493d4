// defines: RaceCell, the shadow of one shared-memory element, and race_on_read/race_on_write,
// the racecheck rules (compute-sanitizer --tool racecheck's hazards): two different threads
// touch the same element, at least one writes, and no barrier orders them — no __syncthreads
// between the two accesses, nor a __syncwarp when both threads are in the same warp. A read of
// an element that no thread of the block has written yet is reported too (shared memory starts
// undefined in every block, as compute-sanitizer --tool initcheck would say).
//
// A cell keeps the last write and the last two readers of distinct threads; a write after three
// or more unordered readers in a mix of warps may be missed (a documented limit).
#pragma once
#include <cstdint>
#include <string>

namespace dp::emu {

struct Access {
  uint64_t block = 0;  // the block serial (0: none); accesses of earlier blocks are ordered
  uint32_t thread = 0; // linear thread index in the block
  uint32_t generation = 0;  // __syncthreads passed before the access
  uint32_t warp_epoch = 0;  // __syncwarp passed before the access
};

struct RaceCell {
  Access write, read1, read2;
};

// Who accesses now.
struct Accessor {
  uint64_t block;
  uint32_t thread, generation, warp_epoch;
};

// The hazard a read or write makes (kind nullptr when none) and the other thread's access.
struct Hazard {
  const char* kind = nullptr;  // "read-after-write", "write-after-read", "write-after-write", "uninitialized read"
  uint32_t other = 0;          // the other thread's linear index
  bool other_wrote = false;
};

Hazard race_on_read(RaceCell& c, const Accessor& me);
Hazard race_on_write(RaceCell& c, const Accessor& me);

}  // namespace dp::emu
