#include "runtime/data/token_shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "base/error.h"

namespace dp::data {
namespace {

int32_t le_i32(const uint8_t* p) {
  return static_cast<int32_t>(static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
                              static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24);
}

void put_le_i32(uint8_t* p, int32_t v) {
  const uint32_t u = static_cast<uint32_t>(v);
  for (int b = 0; b < 4; ++b) p[b] = static_cast<uint8_t>(u >> (8 * b));
}

// Closes fd on every path out of the constructor.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

int64_t check_token_shard_header(const std::string& path, const uint8_t* header, uint64_t file_bytes) {
  constexpr const char* kHow = "llm.c's token shards: 256 int32 (magic 20240520, version 1, token count), then uint16 "
                               "tokens; write them with dev/data/data_common.py's write_datafile or dptrain "
                               "make-shards";
  if (file_bytes < kTokenShardHeaderBytes)
    DP_THROW_USER("{}: not a token shard: {} bytes, shorter than the {}-byte header ({})", path, file_bytes,
                  kTokenShardHeaderBytes, kHow);
  const int32_t magic = le_i32(header), version = le_i32(header + 4), count = le_i32(header + 8);
  if (magic != kTokenShardMagic)
    DP_THROW_USER("{}: not a token shard: magic {} where {} was expected ({})", path, magic, kTokenShardMagic, kHow);
  if (version != kTokenShardVersion)
    DP_THROW_USER("{}: token shard version {}, expected {} (uint16 tokens){}", path, version, kTokenShardVersion,
                  version == 2 ? "; version 2 holds the bytes of text, not tokens: tokenize it into a version 1 shard"
                               : "");
  if (count < 0) DP_THROW_USER("{}: token shard header gives a negative token count {}", path, count);
  const uint64_t need = kTokenShardHeaderBytes + 2 * static_cast<uint64_t>(count);
  if (file_bytes < need)
    DP_THROW_USER("{}: truncated token shard: the header gives {} tokens ({} bytes with the header) but the file has "
                  "{} bytes ({} whole tokens); copy the shard again or rewrite it",
                  path, count, need, file_bytes, (file_bytes - kTokenShardHeaderBytes) / 2);
  if (file_bytes > need)
    DP_THROW_USER("{}: token shard of {} bytes where its header's {} tokens take {}: {} bytes after the last token "
                  "(not a shard of this format, or a header not updated after appending)",
                  path, file_bytes, count, need, file_bytes - need);
  return count;
}

MappedTokenShard::MappedTokenShard(const std::string& path) : path_(path) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) DP_THROW_USER("{}: cannot open token shard ({})", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) DP_THROW_USER("{}: cannot stat token shard ({})", path, std::strerror(errno));
  if (S_ISDIR(st.st_mode)) DP_THROW_USER("{}: is a folder, not a token shard", path);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  uint8_t header[kTokenShardHeaderBytes] = {};
  if (size >= kTokenShardHeaderBytes) {
    size_t got = 0;
    while (got < sizeof(header)) {
      const ssize_t r = ::pread(f.fd, header + got, sizeof(header) - got, static_cast<off_t>(got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) DP_THROW_USER("{}: cannot read the token shard header ({})", path, r < 0 ? std::strerror(errno) : "end of file");
      got += static_cast<size_t>(r);
    }
  }
  num_tokens_ = check_token_shard_header(path, header, size);
  map_bytes_ = static_cast<size_t>(size);
  void* m = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_SHARED, f.fd, 0);
  if (m == MAP_FAILED) DP_THROW_USER("{}: cannot map the token shard ({})", path, std::strerror(errno));
  map_ = m;
  // The windows are read in the sampler's (random) order: no read-ahead beyond the pages touched.
  ::madvise(map_, map_bytes_, MADV_RANDOM);
  tokens_ = reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(map_) + kTokenShardHeaderBytes);
}

MappedTokenShard::~MappedTokenShard() {
  if (map_) ::munmap(map_, map_bytes_);
}

void write_token_shard(const std::string& path, std::span<const uint16_t> tokens) {
  if (tokens.size() > static_cast<size_t>(INT32_MAX))
    DP_THROW_USER("{}: {} tokens do not fit one shard (the header's count is an int32); split them", path,
                  tokens.size());
  std::vector<uint8_t> header(kTokenShardHeaderBytes, 0);
  put_le_i32(header.data(), kTokenShardMagic);
  put_le_i32(header.data() + 4, kTokenShardVersion);
  put_le_i32(header.data() + 8, static_cast<int32_t>(tokens.size()));
  std::vector<uint8_t> body(tokens.size() * 2);
  for (size_t i = 0; i < tokens.size(); ++i) {  // little-endian whatever the host
    body[2 * i] = static_cast<uint8_t>(tokens[i] & 0xff);
    body[2 * i + 1] = static_cast<uint8_t>(tokens[i] >> 8);
  }
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) DP_THROW_USER("{}: cannot write ({})", tmp, std::strerror(errno));
  const bool ok = std::fwrite(header.data(), 1, header.size(), f) == header.size() &&
                  std::fwrite(body.data(), 1, body.size(), f) == body.size() && std::fflush(f) == 0 &&
                  ::fsync(::fileno(f)) == 0;
  const int err = errno;
  if (std::fclose(f) != 0 || !ok) {
    std::remove(tmp.c_str());
    DP_THROW_USER("{}: cannot write ({})", tmp, std::strerror(ok ? errno : err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    DP_THROW_USER("{}: cannot rename {} into place ({})", path, tmp, std::strerror(e));
  }
}

}  // namespace dp::data
