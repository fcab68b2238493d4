// defines: read_file_bytes, which reads a whole file, plain or gzip-compressed, into memory.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace dp::data {

// How many bytes a file must hold, told by its first bytes (its header): nullopt while `head`
// is too short to tell. Pure; the reader asks again as bytes arrive.
using DeclaredSize = std::function<std::optional<uint64_t>(const uint8_t* head, size_t n)>;

// zlib's gzread reads gzip and plain files alike (a file without the gzip magic is passed
// through), so one reader serves "x-ubyte" and "x-ubyte.gz". Throws UserError naming `path`
// when the file cannot be opened or the gzip stream is corrupt or cut short.
// With `declared`, reading stops 16 MiB past the size the header declares (at most `cap` bytes
// before the header has told): a small gzip that inflates to gigabytes (a bomb, or a damaged
// file) is refused after reading that much, not after inflating it all; a file a little too
// long is returned whole, for the caller's exact message.
std::vector<uint8_t> read_file_bytes(const std::string& path, const DeclaredSize& declared = nullptr,
                                     uint64_t cap = uint64_t{1} << 40);

}  // namespace dp::data
