// defines: the libFuzzer target of the IDX reader (runtime/data/idx.h), Fashion-MNIST's format and
// the one data format read through zlib (a file with the gzip magic is inflated). The input is two
// files: a 4-byte little-endian length L, then L bytes of the image file and the rest the label
// file; its first byte after the length picks the class count (0: from the labels, else 1-255).
// Opening may throw UserError (one line naming a file), never crash, allocate what the files do
// not hold, or read past them; whatever opens is read back completely.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "runtime/data/dataset.h"
#include "runtime/data/idx.h"

namespace {

// A memory file holding `n` bytes at `p`, its /proc path; "" when the kernel refuses.
std::string memory_file(int fd, const uint8_t* p, size_t n) {
  if (fd < 0 || ::ftruncate(fd, 0) != 0 || ::pwrite(fd, p, n, 0) != static_cast<ssize_t>(n)) return "";
  return "/proc/self/fd/" + std::to_string(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const int images_fd = ::memfd_create("fuzz-idx-images", MFD_CLOEXEC);
  static const int labels_fd = ::memfd_create("fuzz-idx-labels", MFD_CLOEXEC);
  if (size < 5) return 0;
  uint32_t split = 0;
  std::memcpy(&split, data, 4);
  const int classes = data[4];
  data += 5, size -= 5;
  split = static_cast<uint32_t>(std::min<size_t>(split, size));
  const std::string images = memory_file(images_fd, data, split);
  const std::string labels = memory_file(labels_fd, data + split, size - split);
  if (images.empty() || labels.empty()) return 0;
  try {
    auto ds = dp::data::open_idx(images, labels, classes);
    // With no samples the file does not bound the shape (up to dp::data::kMaxSampleValues).
    std::vector<float> sample(ds->size() > 0 ? static_cast<size_t>(dp::shape_numel(ds->sample_shape())) : 0);
    for (int64_t i = 0; i < ds->size(); ++i) {
      const int32_t label = ds->get(i, sample.data());
      if (label < 0 || label >= ds->num_classes()) __builtin_trap();  // a label the model cannot take
    }
  } catch (const dp::UserError&) {
  }
  return 0;
}
