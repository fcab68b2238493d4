#include "kernels/cuda/emu/libs/elements.h"

#include <cstdio>
#include <cstring>

#include "base/half.h"
#include "kernels/cuda/emu/memory.h"
#include "kernels/cuda/emu/streams.h"

namespace dp::emu::libs {

size_t element_bytes(cudaDataType_t t) {
  switch (t) {
    case CUDA_R_32F: return 4;
    case CUDA_R_16BF:
    case CUDA_R_16F: return 2;
    default: return 0;
  }
}

float load(const void* base, cudaDataType_t t, int64_t index) {
  const auto* bytes = static_cast<const unsigned char*>(base) + index * static_cast<int64_t>(element_bytes(t));
  if (t == CUDA_R_32F) {
    float f;
    std::memcpy(&f, bytes, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, bytes, 2);
  return t == CUDA_R_16BF ? kernels::cpu::bf16_to_f32(h) : kernels::cpu::f16_to_f32(h);
}

void store(void* base, cudaDataType_t t, int64_t index, float v) {
  auto* bytes = static_cast<unsigned char*>(base) + index * static_cast<int64_t>(element_bytes(t));
  if (t == CUDA_R_32F) {
    std::memcpy(bytes, &v, 4);
    return;
  }
  const uint16_t h = t == CUDA_R_16BF ? kernels::cpu::f32_to_bf16(v) : kernels::cpu::f32_to_f16(v);
  std::memcpy(bytes, &h, 2);
}

int64_t matrix_span(int64_t rows, int64_t cols, int64_t ld) {
  return rows <= 0 || cols <= 0 ? 0 : (cols - 1) * ld + rows;
}

bool in_device_memory(const void* p, cudaDataType_t t, int64_t elements) {
  if (elements <= 0) return true;
  return p != nullptr && is_device_range(p, static_cast<size_t>(elements) * element_bytes(t));
}

bool known_stream(cudaStream_t s, const char* call) {
  if (check_stream(s, call) == cudaSuccess) return true;
  (void)cudaGetLastError();  // the library's status says it, not the runtime's last error
  return false;
}

void print_refusal(const char* call, const std::string& why, int code) {
  std::fprintf(stderr, "dp cuda emu: %s: %s (status %d)\n", call, why.c_str(), code);
}

}  // namespace dp::emu::libs
