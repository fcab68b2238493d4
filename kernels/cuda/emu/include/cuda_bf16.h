// defines: the emulation build's stand-in for <cuda_bf16.h> (__nv_bfloat16): see kernels/cuda/emu/half_types.h.
#pragma once
#include "kernels/cuda/emu/half_types.h"
