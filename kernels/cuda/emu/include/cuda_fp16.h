// defines: the emulation build's stand-in for <cuda_fp16.h> (__half): see kernels/cuda/emu/half_types.h.
#pragma once
#include "kernels/cuda/emu/half_types.h"
