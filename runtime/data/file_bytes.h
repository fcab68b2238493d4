// defines: read_file_bytes, which reads a whole file, plain or gzip-compressed, into memory.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dp::data {

// zlib's gzread reads gzip and plain files alike (a file without the gzip magic is passed
// through), so one reader serves "x-ubyte" and "x-ubyte.gz". Throws UserError naming `path`
// when the file cannot be opened or the gzip stream is corrupt or cut short.
std::vector<uint8_t> read_file_bytes(const std::string& path);

}  // namespace dp::data
