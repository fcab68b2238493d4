#include "launch/telemetry/tensorboard_record.h"

#include <cstring>

#include "base/crc32c.h"
#include "base/error.h"

namespace dp::metrics {
namespace {
// Little-endian stores and loads (the format is little-endian on every host).
template <typename T>
void put_le(std::string& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
template <typename T>
T get_le(const char* p) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
}  // namespace

uint32_t masked_crc32c(const void* data, size_t n) {
  const uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string frame_record(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  put_le<uint64_t>(out, data.size());
  put_le<uint32_t>(out, masked_crc32c(out.data(), 8));
  out.append(data);
  put_le<uint32_t>(out, masked_crc32c(data.data(), data.size()));
  return out;
}

std::vector<std::string> read_records(std::string_view bytes, const std::string& what) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < bytes.size()) {
    const size_t index = out.size();
    if (bytes.size() - pos < 12)
      throw DpError(fmt::format("{}: record {} at byte {}: truncated header ({} bytes, need 12): the file is "
                                "truncated (a writer killed mid-record?)",
                                what, index, pos, bytes.size() - pos));
    const char* p = bytes.data() + pos;
    const uint64_t len = get_le<uint64_t>(p);
    const uint32_t len_crc = get_le<uint32_t>(p + 8), len_crc_now = masked_crc32c(p, 8);
    if (len_crc != len_crc_now)
      throw DpError(fmt::format("{}: record {} at byte {}: length CRC mismatch (stored {:#010x}, computed {:#010x}): "
                                "the file is corrupt",
                                what, index, pos, len_crc, len_crc_now));
    if (bytes.size() - pos - 12 < len || bytes.size() - pos - 12 - len < 4)
      throw DpError(fmt::format("{}: record {} at byte {}: truncated data ({} bytes + CRC announced, {} present): "
                                "the file is truncated (a writer killed mid-record?)",
                                what, index, pos, len, bytes.size() - pos - 12));
    const uint32_t crc = get_le<uint32_t>(p + 12 + len), crc_now = masked_crc32c(p + 12, len);
    if (crc != crc_now)
      throw DpError(fmt::format("{}: record {} at byte {}: data CRC mismatch (stored {:#010x}, computed {:#010x}): "
                                "the file is corrupt",
                                what, index, pos, crc, crc_now));
    out.emplace_back(p + 12, len);
    pos += 12 + len + 4;
  }
  return out;
}

}  // namespace dp::metrics
