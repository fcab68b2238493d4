// defines: the emulation build's stand-in for <cublas_v2.h>: the cuBLAS API of cublas_api.h.
#pragma once
#include <cublas_api.h>
