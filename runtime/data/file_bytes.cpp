#include "runtime/data/file_bytes.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace dp::data {
namespace {
// zlib's message for `f`, without the "<path>: " it prefixes (our messages name the file once).
std::string zlib_message(gzFile f, const std::string& path, int* zerr) {
  std::string msg = gzerror(f, zerr);
  if (*zerr == Z_ERRNO) return std::strerror(errno);
  const std::string prefix = path + ": ";
  if (msg.compare(0, prefix.size(), prefix) == 0) msg.erase(0, prefix.size());
  return msg;
}
}  // namespace

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  errno = 0;
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr)
    DP_THROW_USER("{}: cannot open ({})", path, errno ? std::strerror(errno) : "out of memory in zlib");
  struct Closer {
    gzFile f;
    ~Closer() { gzclose(f); }
  } closer{f};
  gzbuffer(f, 1 << 20);

  std::vector<uint8_t> out;
  constexpr size_t kChunk = 1 << 22;
  for (;;) {
    size_t old = out.size();
    out.resize(old + kChunk);
    int got = gzread(f, out.data() + old, static_cast<unsigned>(kChunk));
    if (got < 0) {
      int zerr = 0;
      DP_THROW_USER("{}: read failed ({})", path, zlib_message(f, path, &zerr));
    }
    out.resize(old + static_cast<size_t>(got));
    if (got == 0) break;
  }
  // A gzip stream cut short reads as a clean end of data; gzerror tells the difference.
  int zerr = 0;
  const std::string msg = zlib_message(f, path, &zerr);
  if (zerr != Z_OK && zerr != Z_STREAM_END)
    DP_THROW_USER("{}: corrupt or truncated gzip data ({})", path, msg);
  return out;
}

}  // namespace dp::data
