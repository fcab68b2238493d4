// defines: DP_HD, the mark of a function that nvcc's device pass and any host compiler can both
// build: __host__ __device__ __forceinline__ under nvcc, plain inline elsewhere (g++, and the
// CUDA emulator's host build of the kernels). In base/ because the one Philox (base/philox.h)
// runs on both sides; kernels/host_device.h builds its rounded fp:: operations on it.
#pragma once

#if defined(__CUDACC__)
#define DP_HD __host__ __device__ __forceinline__
#else
#define DP_HD inline
#endif
