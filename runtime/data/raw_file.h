// defines: RawFile, an open file read by position (pread, so that threads share it), and
// read_whole_file: the plain reads of the image and array data sets (file_bytes.h reads
// possibly-gzipped files whole instead).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dp::data {

class RawFile {
 public:
  // Throws UserError naming the path when it cannot be opened.
  explicit RawFile(const std::string& path);
  ~RawFile();
  RawFile(const RawFile&) = delete;
  RawFile& operator=(const RawFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  int64_t mtime_ns() const { return mtime_ns_; }
  // n bytes at offset: UserError naming the file (and `what`) when fewer can be read.
  std::vector<uint8_t> read(uint64_t offset, size_t n, const std::string& what = "") const;
  // Up to n bytes at offset (fewer at the end of the file).
  size_t read_some(uint64_t offset, size_t n, uint8_t* out) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  int64_t mtime_ns_ = 0;
};

std::vector<uint8_t> read_whole_file(const std::string& path);

}  // namespace dp::data
