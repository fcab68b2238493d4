// defines: the emulated math libraries' view of device memory: element sizes of the data types
// they take (f32, bf16, f16), loads and stores through f32 (bf16/f16 rounded to nearest even, as
// the CPU twins and the emulator's __nv_bfloat16/__half do), the checks that an operand lies in
// device memory and how well it is aligned, and library_refusal (a refused call's message).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>
#include <library_types.h>

namespace dp::emu::libs {

// Bytes per element of f32, bf16 or f16 data; 0 for any other type (not emulated).
size_t element_bytes(cudaDataType_t t);
float load(const void* base, cudaDataType_t t, int64_t index);
void store(void* base, cudaDataType_t t, int64_t index, float v);

// Elements a column-major rows x cols matrix with leading dimension ld spans (0 if empty).
int64_t matrix_span(int64_t rows, int64_t cols, int64_t ld);
// Whether `elements` elements of type t from p lie in one device allocation (true for none).
bool in_device_memory(const void* p, cudaDataType_t t, int64_t elements);

// Whether `s` is a stream the runtime knows (the default ones or a live created one); a bad one
// is reported as made by `call` and leaves no runtime error behind (a library returns its own
// status for it).
bool known_stream(cudaStream_t s, const char* call);

// Prints "dp cuda emu: <call>: <why>" on stderr (as the runtime's refusals do) and returns
// `status`, so that a refusal reads `return library_refusal(CUBLAS_STATUS_INVALID_VALUE, ...)`.
void print_refusal(const char* call, const std::string& why, int code);
template <typename Status>
Status library_refusal(Status status, const char* call, const std::string& why) {
  print_refusal(call, why, static_cast<int>(status));
  return status;
}

}  // namespace dp::emu::libs
