// defines: write_npy, a version-1 .npy file as numpy.save writes it, for tests that make array
// data sets or feed the reader bad headers. Header-only.
#pragma once
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

namespace dp::test {

// `header` (the dict's text) padded with spaces to a multiple of 64 bytes as numpy.save pads it,
// then n bytes of data.
inline void write_npy(const std::string& path, const std::string& header, const void* data, size_t n) {
  std::string h = header;
  h.append(64 - (10 + h.size() + 1) % 64, ' ');
  h += '\n';
  std::ofstream f(path, std::ios::binary);
  f.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(h.size());
  f.write(reinterpret_cast<const char*>(&len), 2);
  f << h;
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
}

}  // namespace dp::test
