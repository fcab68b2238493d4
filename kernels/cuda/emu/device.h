// defines: the emulation build's device queries — one device (index 0) with an sm_90 device's
// properties and attributes, so that cuda_device_count() is 1 and the GPU tests run instead of
// skipping; cudaSetDevice to any other index fails with cudaErrorInvalidDevice.
#pragma once
#include <cstddef>

#include "kernels/cuda/emu/types.h"

cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
cudaError_t cudaDeviceGetPCIBusId(char* bus_id, int len, int device);
cudaError_t cudaDriverGetVersion(int* version);
cudaError_t cudaRuntimeGetVersion(int* version);
