#include "runtime/data/raw_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace dp::data {

RawFile::RawFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) DP_THROW_USER("{}: cannot open ({})", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || S_ISDIR(st.st_mode)) {
    const int err = S_ISDIR(st.st_mode) ? EISDIR : errno;
    ::close(fd_);
    DP_THROW_USER("{}: cannot read ({})", path, std::strerror(err));
  }
  size_ = static_cast<uint64_t>(st.st_size);
  mtime_ns_ = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

RawFile::~RawFile() {
  if (fd_ >= 0) ::close(fd_);
}

size_t RawFile::read_some(uint64_t offset, size_t n, uint8_t* out) const {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd_, out + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      DP_THROW_USER("{}: read failed at byte {} ({})", path_, offset + got, std::strerror(errno));
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

std::vector<uint8_t> RawFile::read(uint64_t offset, size_t n, const std::string& what) const {
  std::vector<uint8_t> out(n);
  const size_t got = read_some(offset, n, out.data());
  if (got != n)
    DP_THROW_USER("{}: truncated: {}{} bytes at byte {} but the file ends after {}", path_,
                  what.empty() ? "" : what + " needs ", n, offset, size_);
  return out;
}

std::vector<uint8_t> read_whole_file(const std::string& path) {
  RawFile f(path);
  return f.read(0, static_cast<size_t>(f.size()));
}

}  // namespace dp::data
