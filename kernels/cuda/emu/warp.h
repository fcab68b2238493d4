// defines: the warp collectives of the emulation build — __shfl_sync, __shfl_up_sync,
// __shfl_down_sync, __shfl_xor_sync, __ballot_sync, __any_sync, __all_sync, __syncwarp,
// __activemask — with lockstep semantics: every lane named in the mask must reach the same
// collective (same function, same mask, same source line) before any of them gets its result.
//
// What a GPU leaves undefined is a fault here, naming kernel, block, thread and lane: a mask that
// omits the calling lane, names a lane that has exited or does not exist (a partial last warp),
// or a lane waiting in a different collective; a shuffle reading a lane outside the mask; a lane
// exiting while others wait for it; a width that is not a power of two up to 32. Lane numbering
// and the shuffle's source-lane arithmetic (width segments, clamping) follow PTX's shfl.sync.
#pragma once
#include <cstdint>
#include <cstring>
#include <source_location>
#include <type_traits>

#include "kernels/cuda/emu/block.h"

namespace dp::emu {

// One lane's part in a collective; returns its result bits (the shuffled value's bits, the
// ballot word, or 0/1 for any/all).
uint64_t warp_collective(WarpOpKind kind, unsigned mask, uint64_t value, int arg, int width,
                         std::source_location site);

template <typename T>
T shuffle(WarpOpKind kind, unsigned mask, T var, int arg, int width, std::source_location site) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "a shuffled value is at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &var, sizeof(T));
  bits = warp_collective(kind, mask, bits, arg, width, site);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}

}  // namespace dp::emu

template <typename T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = 32,
              std::source_location site = std::source_location::current()) {
  return dp::emu::shuffle(dp::emu::WarpOpKind::ShflIdx, mask, var, src_lane, width, site);
}
template <typename T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32,
                 std::source_location site = std::source_location::current()) {
  return dp::emu::shuffle(dp::emu::WarpOpKind::ShflUp, mask, var, static_cast<int>(delta), width, site);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32,
                   std::source_location site = std::source_location::current()) {
  return dp::emu::shuffle(dp::emu::WarpOpKind::ShflDown, mask, var, static_cast<int>(delta), width, site);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32,
                  std::source_location site = std::source_location::current()) {
  return dp::emu::shuffle(dp::emu::WarpOpKind::ShflXor, mask, var, lane_mask, width, site);
}

inline unsigned __ballot_sync(unsigned mask, int pred, std::source_location site = std::source_location::current()) {
  return static_cast<unsigned>(dp::emu::warp_collective(dp::emu::WarpOpKind::Ballot, mask, pred != 0, 0, 32, site));
}
inline int __any_sync(unsigned mask, int pred, std::source_location site = std::source_location::current()) {
  return static_cast<int>(dp::emu::warp_collective(dp::emu::WarpOpKind::Any, mask, pred != 0, 0, 32, site));
}
inline int __all_sync(unsigned mask, int pred, std::source_location site = std::source_location::current()) {
  return static_cast<int>(dp::emu::warp_collective(dp::emu::WarpOpKind::All, mask, pred != 0, 0, 32, site));
}
// A barrier among the mask's lanes that also orders their shared-memory accesses (racecheck).
inline void __syncwarp(unsigned mask = 0xFFFFFFFFu, std::source_location site = std::source_location::current()) {
  dp::emu::warp_collective(dp::emu::WarpOpKind::SyncWarp, mask, 0, 0, 32, site);
}
// The lanes of the caller's warp that have not exited. (A GPU reports the lanes converged with
// the caller right now; the emulator runs lanes one at a time and cannot tell.)
unsigned __activemask();
