// defines: sm_count, the number of streaming multiprocessors of the calling thread's current
// device, read once per device from its properties (cudaDevAttrMultiProcessorCount) and cached;
// the element-wise passes size their grid-stride loops with it (pass_shape.h's pass_blocks).
#pragma once

namespace dp::kernels::cuda {

// The current device's SM count (an H100 SXM: 132; the CUDA emulator reports 132 too). When the
// device cannot be asked (no device, a failed call), 1: a grid of a few blocks is still correct
// for a grid-stride loop, and the failed call's error stays set for the launch check that follows
// (DP_RETURN_LAUNCH) to report. Thread-safe; one cudaGetDevice per call after the first.
int sm_count();

}  // namespace dp::kernels::cuda
