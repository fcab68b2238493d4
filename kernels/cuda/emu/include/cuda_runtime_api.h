// defines: the emulation build's stand-in for the CUDA runtime API header: the host calls
// (memory, streams, events, device queries, errors, function attributes), backed by host memory.
// On the include path of the emulation targets only (kernels/cuda/emu/README.md).
#pragma once
#include "kernels/cuda/emu/device.h"
#include "kernels/cuda/emu/errors.h"
#include "kernels/cuda/emu/launch.h"
#include "kernels/cuda/emu/memory.h"
#include "kernels/cuda/emu/streams.h"
#include "kernels/cuda/emu/types.h"
