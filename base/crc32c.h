// defines: crc32c, the CRC-32C (Castagnoli) checksum of checkpoint tensors.
//
// CRC-32C: reflected polynomial 0x82F63B78 (0x1EDC6F41 unreflected), initial value and final
// XOR 0xFFFFFFFF; the checksum of iSCSI (RFC 3720, appendix B.4, which gives the test vectors)
// and of ext4/Btrfs metadata. The x86 SSE4.2 `crc32` instruction computes exactly this
// polynomial, so it is used when the CPU has it (checked once at run time); otherwise a
// slicing-by-8 table (Intel's "slicing-by-8", Kounavis & Berry 2005) does the same in software.
#pragma once
#include <cstddef>
#include <cstdint>

namespace dp {

// CRC-32C of [data, data + n). Extend a running checksum by passing the previous result:
// crc32c(b, nb, crc32c(a, na)) == crc32c(a ++ b).
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);

namespace detail {
// The two implementations behind crc32c(), exposed so tests can compare them.
uint32_t crc32c_portable(const void* data, size_t n, uint32_t crc);
bool crc32c_hw_available();
uint32_t crc32c_hw(const void* data, size_t n, uint32_t crc);  // only if crc32c_hw_available()
}  // namespace detail

}  // namespace dp
