// defines: DP_SHARED and DP_DYNAMIC_SHARED, the project's shared-memory declarations:
//
//   DP_SHARED(float, part, [kThreads]);          // __shared__ float part[kThreads];
//   DP_SHARED(E, tile, [kTile][kTile + 1]);      // __shared__ E tile[kTile][kTile + 1];
//   DP_DYNAMIC_SHARED(float, buf);               // extern __shared__ float buf[]; (16-byte aligned)
//
// In the nvcc build they are exactly the declarations in the comments. In the emulation build a
// plain __shared__ cannot work (a static local would be one array for all blocks and threads of
// all host threads, unchecked), so DP_SHARED gives each block its own heap array, seen through a
// view that checks every index and, with DP_EMU_RACECHECK=1, every access for races between
// barriers (kernels/cuda/emu/shared.h). Use the array with [] only: in the emulation build
// `&part[i]` is not a pointer into it. DP_DYNAMIC_SHARED is a plain pointer in both builds
// (bounds by ASan, no racecheck).
//
// Header for .cu files; C++17 (nvcc).
#pragma once

#if defined(DP_CUDA_EMU)
#include "kernels/cuda/emu/shared.h"

#define DP_SHARED(T, name, dims)                     \
  static constexpr char dp_shared_tag_##name = 0;     \
  const auto name = ::dp::emu::shared_array<T dims>(&dp_shared_tag_##name, #name)
#define DP_DYNAMIC_SHARED(T, name) T* const name = ::dp::emu::dynamic_shared<T>()
#else
#define DP_SHARED(T, name, dims) __shared__ T name dims
#define DP_DYNAMIC_SHARED(T, name)                                   \
  extern __shared__ __align__(16) unsigned char dp_dynamic_shared_[]; \
  T* const name = reinterpret_cast<T*>(dp_dynamic_shared_)
#endif
