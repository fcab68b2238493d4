// CRC-32C: RFC 3720 test vectors, the hardware and table paths agree on every length and
// alignment, and extending a running checksum equals checksumming the concatenation.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "base/crc32c.h"
#include "base/rng.h"

namespace dp {
namespace {

struct Vector {
  const char* what;
  std::vector<unsigned char> bytes;
  uint32_t crc;
};

std::vector<Vector> rfc3720_vectors() {
  std::vector<unsigned char> zeros(32, 0), ones(32, 0xFF), inc(32), dec(32);
  for (int i = 0; i < 32; ++i) inc[i] = static_cast<unsigned char>(i), dec[i] = static_cast<unsigned char>(31 - i);
  const char* digits = "123456789";
  // RFC 3720, appendix B.4 (CRC examples), and the customary check value of "123456789".
  return {{"32 bytes of zeros", zeros, 0x8A9136AAu},
          {"32 bytes of 0xFF", ones, 0x62A8AB43u},
          {"32 incrementing bytes", inc, 0x46DD794Eu},
          {"32 decrementing bytes", dec, 0x113FDB5Cu},
          {"\"123456789\"", std::vector<unsigned char>(digits, digits + 9), 0xE3069283u},
          {"empty", {}, 0u}};
}

TEST(Crc32c, Rfc3720VectorsOnEveryPath) {
  for (const auto& v : rfc3720_vectors()) {
    EXPECT_EQ(crc32c(v.bytes.data(), v.bytes.size()), v.crc) << v.what;
    EXPECT_EQ(detail::crc32c_portable(v.bytes.data(), v.bytes.size(), 0), v.crc) << v.what << " (table)";
    if (detail::crc32c_hw_available()) {
      EXPECT_EQ(detail::crc32c_hw(v.bytes.data(), v.bytes.size(), 0), v.crc) << v.what << " (SSE4.2)";
    }
  }
}

TEST(Crc32c, HardwareAndTableAgreeOnAllLengthsAndAlignments) {
  if (!detail::crc32c_hw_available()) GTEST_SKIP() << "no SSE4.2 on this CPU: only the table path exists";
  Rng rng(7, 0);
  std::vector<unsigned char> buf(4096 + 16);
  for (auto& b : buf) b = static_cast<unsigned char>(rng.next_u32());
  for (size_t offset = 0; offset < 8; ++offset)
    for (size_t n : {0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000, 4096}) {
      const unsigned char* p = buf.data() + offset;
      ASSERT_EQ(detail::crc32c_hw(p, n, 0), detail::crc32c_portable(p, n, 0)) << "offset " << offset << " n " << n;
      ASSERT_EQ(detail::crc32c_hw(p, n, 0x12345678u), detail::crc32c_portable(p, n, 0x12345678u));
    }
}

TEST(Crc32c, ExtendingEqualsConcatenating) {
  const std::string a = "dptrain checkpoint ", b = "tensor bytes, split anywhere";
  const std::string ab = a + b;
  const uint32_t whole = crc32c(ab.data(), ab.size());
  for (size_t cut = 0; cut <= ab.size(); ++cut) {
    uint32_t c = crc32c(ab.data(), cut);
    EXPECT_EQ(crc32c(ab.data() + cut, ab.size() - cut, c), whole) << "cut at " << cut;
    c = detail::crc32c_portable(ab.data(), cut, 0);
    EXPECT_EQ(detail::crc32c_portable(ab.data() + cut, ab.size() - cut, c), whole) << "table, cut at " << cut;
  }
}

TEST(Crc32c, DetectsEverySingleBitFlip) {
  std::vector<unsigned char> buf(64);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<unsigned char>(i * 37);
  const uint32_t ref = crc32c(buf.data(), buf.size());
  for (size_t bit = 0; bit < buf.size() * 8; ++bit) {
    buf[bit / 8] ^= static_cast<unsigned char>(1u << (bit % 8));
    EXPECT_NE(crc32c(buf.data(), buf.size()), ref) << "bit " << bit;
    buf[bit / 8] ^= static_cast<unsigned char>(1u << (bit % 8));
  }
}

}  // namespace
}  // namespace dp
