#include "base/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace dp {
namespace detail {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // reflected Castagnoli polynomial

// kTable[k][b]: the CRC of byte b followed by k zero bytes, for slicing-by-8.
constexpr std::array<std::array<uint32_t, 256>, 8> make_tables() {
  std::array<std::array<uint32_t, 256>, 8> t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c >> 1) ^ (kPoly & (0u - (c & 1u)));
    t[0][b] = c;
  }
  for (int k = 1; k < 8; ++k)
    for (uint32_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFF];
  return t;
}
constexpr auto kTable = make_tables();

}  // namespace

uint32_t crc32c_portable(const void* data, size_t n, uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);  // little-endian host (as safetensors I/O already assumes)
    w ^= c;
    c = kTable[7][w & 0xFF] ^ kTable[6][(w >> 8) & 0xFF] ^ kTable[5][(w >> 16) & 0xFF] ^
        kTable[4][(w >> 24) & 0xFF] ^ kTable[3][(w >> 32) & 0xFF] ^ kTable[2][(w >> 40) & 0xFF] ^
        kTable[1][(w >> 48) & 0xFF] ^ kTable[0][w >> 56];
  }
  for (; n > 0; --n, ++p) c = (c >> 8) ^ kTable[0][(c ^ *p) & 0xFF];
  return ~c;
}

#if defined(__x86_64__)
bool crc32c_hw_available() {
  static const bool have = __builtin_cpu_supports("sse4.2");
  return have;
}

__attribute__((target("sse4.2"))) uint32_t crc32c_hw(const void* data, size_t n, uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t c = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    c = _mm_crc32_u64(c, w);
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  for (; n > 0; --n, ++p) c32 = _mm_crc32_u8(c32, *p);
  return ~c32;
}
#else
bool crc32c_hw_available() { return false; }
uint32_t crc32c_hw(const void* data, size_t n, uint32_t crc) { return crc32c_portable(data, n, crc); }
#endif

}  // namespace detail

uint32_t crc32c(const void* data, size_t n, uint32_t crc) {
  return detail::crc32c_hw_available() ? detail::crc32c_hw(data, n, crc) : detail::crc32c_portable(data, n, crc);
}

}  // namespace dp
