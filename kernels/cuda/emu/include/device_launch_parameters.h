// defines: the emulation build's stand-in for <device_launch_parameters.h> (threadIdx & co).
#pragma once
#include "kernels/cuda/emu/builtins.h"
