#include "runtime/data/file_bytes.h"

#include <zlib.h>

#include <cerrno>
#include <algorithm>
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

std::vector<uint8_t> read_file_bytes(const std::string& path, const DeclaredSize& declared, uint64_t cap) {
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
  std::optional<uint64_t> want;  // what the header declares, once it has been read
  constexpr size_t kChunk = 1 << 22;
  constexpr uint64_t kSlack = 16u << 20;
  for (;;) {
    if (declared && !want) want = declared(out.data(), out.size());
    // A little more than declared is read, so the caller can say by how much a file is too long;
    // far more is refused here.
    const uint64_t limit = want ? *want + kSlack : cap;
    if (out.size() >= limit) {
      if (want)
        DP_THROW_USER("{}: holds more than {} bytes, far beyond the {} its header declares (a damaged file, or a "
                      "compressed file that inflates far beyond its data); reading stopped there",
                      path, limit, *want);
      DP_THROW_USER("{}: holds more than {} bytes, more than a file of this kind can (a damaged file, or a compressed "
                    "file that inflates far beyond its data); reading stopped there",
                    path, cap);
    }
    // Small reads until the header has spoken, then at most what is left of the limit.
    const size_t step = static_cast<size_t>(std::min<uint64_t>(declared && !want ? 4096 : kChunk, limit - out.size()));
    size_t old = out.size();
    out.resize(old + step);
    int got = gzread(f, out.data() + old, static_cast<unsigned>(step));
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
