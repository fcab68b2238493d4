// defines: the emulation build's stand-in for <cuda_runtime.h>: the runtime API plus the device
// language (qualifiers, threadIdx & co, __syncthreads, warp collectives, intrinsics, atomics),
// so that a .cu file compiles as host C++ unchanged apart from its launches (DP_LAUNCH) and its
// shared arrays (DP_SHARED). On the include path of the emulation targets only.
#pragma once
#include <cuda_runtime_api.h>

#include "kernels/cuda/emu/atomics.h"
#include "kernels/cuda/emu/builtins.h"
#include "kernels/cuda/emu/intrinsics.h"
#include "kernels/cuda/emu/warp.h"
