// defines: the emulation build's stand-in for CUDA's <library_types.h>: cudaDataType_t, the
// element types the math libraries are told about. Written from the CUDA documentation, with
// CUDA 12's numeric values; only the types the project passes (and a few neighbours).
#pragma once

typedef enum cudaDataType_t {
  CUDA_R_32F = 0,
  CUDA_R_64F = 1,
  CUDA_R_16F = 2,
  CUDA_R_8I = 3,
  CUDA_R_32I = 10,
  CUDA_R_16BF = 14,
} cudaDataType_t;
typedef cudaDataType_t cudaDataType;
